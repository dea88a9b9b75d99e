"""The benchmark's processes: starting them, and reading their CPU time and memory from /proc.

Each process logs to a file (a pipe nobody reads would fill up and stall it) and is ready once a
JSON line with its ready event and URL appears there.
"""

import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
GATEWAY = str(Path(sys.executable).with_name("gateway"))
TICKS_PER_S = os.sysconf("SC_CLK_TCK")
READY_TIMEOUT_S = 60.0


def clean_env() -> dict[str, str]:
    """This environment without GATEWAY_* variables, which would override the bench's config."""
    return {name: value for name, value in os.environ.items() if not name.startswith("GATEWAY_")}


def wait_ready(process: subprocess.Popen, log: Path, event: str) -> str:
    """The URL of the process's ready line; raises if it exits or is not ready in time."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline and process.poll() is None:
        for line in log.read_text(errors="replace").splitlines():
            if event in line and line.startswith("{"):
                return json.loads(line)["url"]
        time.sleep(0.05)
    stop(process)
    command = process.args if isinstance(process.args, list) else [process.args]
    raise RuntimeError(f"{' '.join(map(str, command[:3]))} was not ready; see {log}")


@contextlib.contextmanager
def running(command: list[str], log: Path, event: str, env: dict[str, str]) -> Iterator[tuple[subprocess.Popen, str]]:
    """A process for the duration of the block: (process, URL of its ready line)."""
    with log.open("ab") as sink:
        process = subprocess.Popen(command, env=env, cwd=ROOT, stdout=sink, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL)
    try:
        yield process, wait_ready(process, log, event)
    finally:
        stop(process)


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def kill9(pid: int, timeout_s: float = 30.0) -> None:
    """SIGKILL `pid` and all its descendants at once (nothing of theirs runs after), and wait until
    each is dead (a zombie or gone)."""
    members = process_tree(pid)
    for member in members:
        with contextlib.suppress(ProcessLookupError):
            os.kill(member, signal.SIGKILL)
    deadline = time.monotonic() + timeout_s
    while any(_alive(member) for member in members):
        if time.monotonic() > deadline:
            raise RuntimeError(f"process {pid} outlived SIGKILL for {timeout_s} s")
        time.sleep(0.01)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def process_tree(pid: int) -> list[int]:
    """`pid` and all its descendants (a supervisor's workers), found through /proc."""
    found, pending = [], [pid]
    while pending:
        current = pending.pop()
        found.append(current)
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children") as children:
                    pending.extend(int(child) for child in children.read().split())
    return found


def cpu_seconds(pid: int) -> tuple[float, float]:
    """(utime, stime) of `pid` and every descendant (all their threads), in seconds."""
    user = system = 0
    for member in process_tree(pid):
        with contextlib.suppress(OSError):
            member_user, member_system = _ticks(f"/proc/{member}/stat")
            user, system = user + member_user, system + member_system
    return user / TICKS_PER_S, system / TICKS_PER_S


def main_thread_cpu_seconds(pid: int) -> float:
    """utime + stime of `pid`'s main thread alone (an asyncio server's event loop), in seconds."""
    return sum(_ticks(f"/proc/{pid}/task/{pid}/stat")) / TICKS_PER_S


def _ticks(stat_path: str) -> tuple[int, int]:
    """(utime, stime) in clock ticks from a /proc stat file (fields 14 and 15)."""
    with open(stat_path) as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return int(fields[11]), int(fields[12])


def rss_kib(pid: int, field: str = "VmRSS") -> int:
    """Resident memory of one process (VmRSS; "VmHWM" for its peak so far), in KiB."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} for process {pid}")


def peak_rss_kib(pid: int) -> int:
    """The most resident memory one process has had in its life (VmHWM), in KiB."""
    return rss_kib(pid, "VmHWM")


SPARE_FILES = 1024  # descriptors a process needs beyond one per stream (the loop, stdio, imports)


def raise_open_files(needed: int) -> int:
    """Raise this process's open-file limit (inherited by the processes it starts) to at least
    `needed` if allowed; returns the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= needed:
        return soft
    with contextlib.suppress(ValueError, OSError):  # raising the hard limit needs privilege
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, max(hard, needed)))
        return needed
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard
