"""Helpers for the gateway tests: the real `gateway` command in subprocesses, temp configs.

Every subprocess runs with a timeout and is killed if it outlives its test, so nothing here
can hang the suite.
"""

import asyncio
import contextlib
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from tests.support import (
    PROVIDER_KEY, S3_CREDENTIALS, clean_env, decimal_json, postgres_schema, postgres_url, run_process,
)

GATEWAY_BIN = str(Path(sys.executable).with_name("gateway"))
CLI_TIMEOUT_S = 60.0
# Deadlines on waits for a condition (ready, stopped): generous, since a loaded CI runner is slow, not wrong.
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 60.0


def ledger_toml(ledger: Path, extra: str = "") -> str:
    return f'[ledger]\nurl = "sqlite:///{ledger}"\n{extra}'


@contextlib.asynccontextmanager
async def postgres_ledger_url(prefix: str) -> AsyncIterator[str]:
    """The ledger URL of a PostgreSQL schema of its own, for gateway processes to share; the
    schema is dropped afterwards (skips locally, fails under CI=true, without PostgreSQL)."""
    async with postgres_schema(prefix) as schema:
        yield postgres_url(schema=schema)


@contextlib.asynccontextmanager
async def shared_ledger_url(kind: str, tmp_path: Path, prefix: str) -> AsyncIterator[str]:
    """A fresh ledger for gateway processes to share: a SQLite file in `tmp_path` ("sqlite"), or a
    PostgreSQL schema of its own ("postgresql", as `postgres_ledger_url`)."""
    if kind == "sqlite":
        yield f"sqlite:///{tmp_path}/ledger.db"
        return
    async with postgres_ledger_url(prefix) as url:
        yield url


def simulator_providers_toml(sim_url: str) -> str:
    """The [providers] tables that send OpenAI and Google calls to the simulator."""
    return f"""[providers.openai]
base_url = "{sim_url}/v1"
api_key = "{PROVIDER_KEY}"
[providers.google]
base_url = "{sim_url}"
api_key = "{PROVIDER_KEY}"
"""


def replica_toml(ledger_url: str, s3_server: str, s3_bucket: str) -> str:
    """The [ledger] and [storage] sections replicas share: one ledger, one bucket for hosted
    media, one secret to sign its links."""
    return f'''[ledger]
url = "{ledger_url}"
[storage]
s3_endpoint_url = "{s3_server}"
s3_bucket = "{s3_bucket}"
s3_access_key_id = "{S3_CREDENTIALS["access_key_id"]}"
s3_secret_access_key = "{S3_CREDENTIALS["secret_access_key"]}"
signing_secret = "shared-by-every-replica"'''


def write_config(tmp_path: Path, text: str, name: str = "gateway.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def run_cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
            timeout: float = CLI_TIMEOUT_S) -> subprocess.CompletedProcess:
    """`gateway ARGS...` to completion (killed, raising TimeoutExpired, after `timeout`)."""
    return subprocess.run([GATEWAY_BIN, *args], capture_output=True, text=True, cwd=cwd,
                          env=clean_env() if env is None else env, timeout=timeout)


async def run_cli_async(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`run_cli` without blocking the event loop (an in-process gateway keeps serving)."""
    return await run_process(GATEWAY_BIN, *args, timeout=CLI_TIMEOUT_S, env=clean_env() if env is None else env)


async def admin_cli(config: str, *args: str) -> dict:
    """`gateway admin ARGS... --config CONFIG`, which must succeed: the JSON it printed, numbers exact."""
    result = await run_cli_async("admin", *args, "--config", config)
    assert result.returncode == 0, result.stderr
    return decimal_json(result.stdout.encode())


def one_json_object(stdout: str) -> dict:
    """The single JSON object a CLI command printed (fails on anything else)."""
    lines = stdout.splitlines()
    assert len(lines) == 1, f"expected exactly one line of output, got {stdout!r}"
    obj = json.loads(lines[0])
    assert isinstance(obj, dict), stdout
    return obj


def count_events(db: Path) -> int:
    """How many events the ledger file holds (0 when it does not exist yet)."""
    if not db.exists():
        return 0
    connection = sqlite3.connect(db)
    try:
        (count,), = connection.execute("SELECT COUNT(*) FROM events").fetchall()
        return count
    finally:
        connection.close()


def json_lines(text: str) -> list[dict]:
    """Every line of `text` that is a JSON object (log lines), in order."""
    found = []
    for line in text.splitlines():
        with contextlib.suppress(ValueError):
            obj = json.loads(line)
            if isinstance(obj, dict):
                found.append(obj)
    return found


def closed_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def port_is_open(url: str) -> bool:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=1).close()
    except OSError:
        return False
    return True


def children_of(pid: int) -> list[int]:
    """The pids whose parent is `pid` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            stat = (entry / "stat").read_text()
            ppid = int(stat.rpartition(")")[2].split()[1])  # the field after the state
            if ppid == pid:
                found.append(int(entry.name))
    return found


def is_running(pid: int) -> bool:
    """True while `pid` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


class GatewayProcess:
    """A running `gateway serve` or `gateway demo`, its output collected line by line."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.stdout_lines: list[str] = []
        self.stderr_lines: list[str] = []
        self._readers = [asyncio.create_task(self._collect(proc.stdout, self.stdout_lines)),
                         asyncio.create_task(self._collect(proc.stderr, self.stderr_lines))]

    @staticmethod
    async def _collect(stream: asyncio.StreamReader, sink: list[str]) -> None:
        while line := await stream.readline():
            sink.append(line.decode(errors="replace"))

    @property
    def stdout(self) -> str:
        return "".join(self.stdout_lines)

    @property
    def stderr(self) -> str:
        return "".join(self.stderr_lines)

    async def wait_for_output(self, found: Callable[[str, str], object],
                              timeout: float = READY_TIMEOUT_S) -> object:
        """Poll until `found(stdout, stderr)` is truthy; fail if the process dies or time runs out."""
        deadline = time.monotonic() + timeout
        while True:
            result = found(self.stdout, self.stderr)
            if result:
                return result
            if self.proc.returncode is not None or time.monotonic() > deadline:
                await asyncio.sleep(0.2)  # let the readers drain what is left
                raise AssertionError(
                    f"never printed what was awaited (exit {self.proc.returncode});\n"
                    f"stdout:\n{self.stdout}\nstderr:\n{self.stderr}")
            await asyncio.sleep(0.05)

    async def ready_url(self) -> str:
        """The URL of the `gateway_ready` log line on stderr."""
        def ready(_stdout: str, stderr: str) -> str | None:
            return next((line["url"] for line in json_lines(stderr)
                         if line.get("event") == "gateway_ready"), None)
        return await self.wait_for_output(ready)

    async def stop(self, sig: int = signal.SIGTERM) -> int:
        """Send `sig`, wait for the exit (kill after STOP_TIMEOUT_S), return the exit code."""
        self.proc.send_signal(sig)
        try:
            code = await asyncio.wait_for(self.proc.wait(), STOP_TIMEOUT_S)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
            raise AssertionError(f"gateway did not stop within {STOP_TIMEOUT_S} s of {sig!r}") from None
        await asyncio.wait_for(asyncio.gather(*self._readers), 5)
        return code

    async def close(self) -> None:
        """Kill what is left of it and of what it started (its session's process group: workers, a
        demo's simulator, which hold its pipes), then reap it: nothing outlives the test's loop."""
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)  # start_new_session: its pid is the group's
            await self.proc.wait()
        for reader in self._readers:
            reader.cancel()
        await asyncio.gather(*self._readers, return_exceptions=True)


@contextlib.asynccontextmanager
async def gateway_process(*args: str, env: dict[str, str], cwd: Path | None = None
                          ) -> AsyncIterator[GatewayProcess]:
    """`gateway ARGS...` running for the duration of the block, killed if still alive after it."""
    async with running_process(GATEWAY_BIN, *args, env=env, cwd=cwd) as running:
        yield running


@contextlib.asynccontextmanager
async def running_process(*command: str, env: dict[str, str], cwd: Path | None = None
                          ) -> AsyncIterator[GatewayProcess]:
    """`command` (a gateway, a sweeper) running for the duration of the block, its output
    collected, killed and reaped if still alive after it."""
    proc = await asyncio.create_subprocess_exec(
        *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        stdin=asyncio.subprocess.DEVNULL, env=env, cwd=cwd, start_new_session=True)
    running = GatewayProcess(proc)
    try:
        yield running
    finally:
        await running.close()

