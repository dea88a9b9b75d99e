"""The load generators, each run as a process of its own, and the CPU they cost the target.

A run's result is the generator's JSON plus the target's CPU time over the run (utime+stime of
the target process and all its descendants, from /proc) per request answered.
"""

import contextlib
import subprocess
from collections.abc import Callable, Iterator

import orjson

from bench import http_wire, procs, wrk
from bench.gateways import Target

CHAT_BODY = orjson.dumps(http_wire.CHAT)


def measured(target: Target, run: Callable[[], dict]) -> dict:
    """Run `run()` and add the target's CPU time per request answered (user + system; the
    system share alone too, since a commit's fsync is kernel time)."""
    user_before, system_before = procs.cpu_seconds(target.pid)
    result = run()
    user_after, system_after = procs.cpu_seconds(target.pid)
    user, system, requests = user_after - user_before, system_after - system_before, max(result["requests"], 1)
    return {**result, "cpu_s": round(user + system, 3), "cpu_system_s": round(system, 3),
            "cpu_us_per_request": round(1e6 * (user + system) / requests, 1),
            "cpu_system_us_per_request": round(1e6 * system / requests, 1)}


def python_client(module: str, target: Target, *options: str) -> dict:
    """Run `python -m module` against the target; its last stdout line is its JSON result."""
    done = subprocess.run([procs.PYTHON, "-m", module, "--url", target.url, "--key", target.key, *options],
                          cwd=procs.ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{module} failed ({done.returncode}): {done.stderr[-2000:]}")
    return orjson.loads(done.stdout.strip().splitlines()[-1])


def closed_loop(target: Target, connections: int, duration_s: int) -> dict:
    return measured(target, lambda: wrk.run(target.url, target.key, CHAT_BODY, connections, duration_s))


def open_loop(target: Target, rate: float, duration_s: int) -> dict:
    def run() -> dict:
        result = python_client("bench.openloop", target, "--rate", str(rate), "--duration", str(duration_s))
        return {**result, "in_flight": result["unfinished"]}
    return measured(target, run)


def streamed(target: Target, connections: int, duration_s: float, body: dict | None = None) -> dict:
    """bench.streams' closed loop; `body`'s fields, if any, laid over its request's (another model)."""
    return measured(target, lambda: python_client(
        "bench.streams", target, "--connections", str(connections), "--duration", str(duration_s),
        "--body", orjson.dumps(body or {}).decode()))


@contextlib.contextmanager
def streams_held(target: Target, count: int) -> Iterator[dict]:
    """`count` streams open through the target for the block: yields the client's report once
    each has its first event (or failed); closes them all after the block."""
    client = subprocess.Popen(
        [procs.PYTHON, "-m", "bench.streams", "--mode", "hold", "--url", target.url, "--key", target.key,
         "--connections", str(count)], cwd=procs.ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert client.stdin is not None and client.stdout is not None  # both PIPE above
    try:
        yield orjson.loads(client.stdout.readline() or '{"streams_open": 0, "failed": -1}')
    finally:
        client.stdin.close()  # the client closes its streams and exits
        with contextlib.suppress(subprocess.TimeoutExpired):
            client.wait(30)
        procs.stop(client)
