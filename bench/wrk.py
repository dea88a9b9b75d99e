"""Closed-loop load from `wrk` (Debian's package), always in its own process.

A Lua script makes every request the same POST and, when wrk is done, prints one JSON line with
the counts and the latency distribution, so nothing has to be scraped from wrk's text report.
"""

import json
import subprocess
import tempfile
from pathlib import Path

from bench.http_wire import CHAT_PATH

RESULT_MARK = '{"wrk":'
DONE = """
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{"wrk": {"requests": %d, "duration_us": %d, "connect": %d, "read": %d, "write": %d, '
    .. '"non_2xx": %d, "timeout": %d, "p50_us": %d, "p90_us": %d, "p99_us": %d, "max_us": %d}}\\n',
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max))
end
"""


def lua_script(body: bytes, key: str) -> str:
    return (f'wrk.method = "POST"\nwrk.body = {lua_string(body)}\n'
            'wrk.headers["Content-Type"] = "application/json"\n'
            f'wrk.headers["Authorization"] = "Bearer {key}"\n' + DONE)


def lua_string(data: bytes) -> str:
    """A Lua long string literal holding `data` (JSON never contains the closing `]==]`)."""
    return "[==[" + data.decode() + "]==]"


def run(url: str, key: str, body: bytes, connections: int, duration_s: int) -> dict:
    """One closed-loop wrk run (one thread): requests, req/s, p50/p99 in ms, errors."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(lua_script(body, key))
    try:
        output = subprocess.run(
            ["wrk", "-t1", f"-c{connections}", f"-d{duration_s}s", "--timeout", "10s", "--latency",
             "-s", script.name, url + CHAT_PATH], capture_output=True, text=True, check=True).stdout
    finally:
        Path(script.name).unlink()
    result = summary(next(line for line in output.splitlines() if line.startswith(RESULT_MARK)))
    return {**result, "connections": connections, "in_flight": connections}


def summary(line: str) -> dict:
    raw = json.loads(line)["wrk"]
    errors = raw["connect"] + raw["read"] + raw["write"] + raw["timeout"]
    return {"requests": raw["requests"], "ok": raw["requests"] - raw["non_2xx"],
            "rps": round(raw["requests"] / (raw["duration_us"] / 1e6), 1),
            "p50_ms": raw["p50_us"] / 1000, "p90_ms": raw["p90_us"] / 1000,
            "p99_ms": raw["p99_us"] / 1000, "max_ms": raw["max_us"] / 1000,
            "non_2xx": raw["non_2xx"], "socket_errors": errors}
