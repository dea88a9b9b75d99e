"""Throughput and latency of chat completions: straight to the simulator vs through the gateway.

Runs the simulator and `gateway serve` as separate processes (as in production), drives them
from this process with a bounded number of requests over loopback, and prints a table.
The difference between the two rows is the gateway's own cost: auth, validation, one upstream
call over a pooled session, billing, and a durable group-committed ledger write.

    python -m bench.gateway_throughput [--requests 4000] [--concurrency 64] [--stream]
"""

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
GATEWAY = str(Path(sys.executable).with_name("gateway"))


async def start(command: list[str], env: dict, ready: str, log: Path) -> tuple[subprocess.Popen, str]:
    """Start a process logging to a file (a pipe nobody reads would fill up and stall it)."""
    with log.open("w") as sink:
        process = subprocess.Popen(command, env=env, cwd=ROOT, stdout=sink, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and process.poll() is None:
        for line in log.read_text().splitlines():
            if ready in line:
                return process, json.loads(line)["url"]
        await asyncio.sleep(0.05)
    process.kill()
    raise RuntimeError(f"{command[0]} was not ready within 30 s; see {log}")


async def drive(url: str, key: str, requests: int, concurrency: int, stream: bool) -> dict:
    body = {"model": "gpt-4o-mini", "stream": stream,
            "messages": [{"role": "user", "content": "benchmark prompt [sim:tokens=16]"}]}
    headers = {"Authorization": f"Bearer {key}"}
    latencies: list[float] = []
    failures = 0
    queue = iter(range(requests))

    async def worker(session: aiohttp.ClientSession) -> None:
        nonlocal failures
        for _ in queue:
            started = time.perf_counter()
            async with session.post(f"{url}/v1/chat/completions", json=body, headers=headers) as response:
                await response.read()
                failures += response.status != 200
            latencies.append(time.perf_counter() - started)

    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        started = time.perf_counter()
        await asyncio.gather(*[worker(session) for _ in range(concurrency)])
        elapsed = time.perf_counter() - started
    latencies.sort()
    return {"rps": requests / elapsed, "p50_ms": 1000 * statistics.median(latencies),
            "p99_ms": 1000 * latencies[int(len(latencies) * 0.99) - 1], "failures": failures}


async def main(args: argparse.Namespace) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")}
    with tempfile.TemporaryDirectory() as tmp:
        sim, sim_url = await start([sys.executable, "-m", "simulator", "--port", "0"], env,
                                   "simulator_ready", Path(tmp, "simulator.log"))
        env.update(GATEWAY_LEDGER_URL=f"sqlite:///{tmp}/bench.db", GATEWAY_SERVER_PORT="0",
                   GATEWAY_PROVIDERS_OPENAI_BASE_URL=f"{sim_url}/v1",
                   GATEWAY_PROVIDERS_OPENAI_API_KEY="sim-bench-key")
        org = json.loads(subprocess.check_output(
            [GATEWAY, "admin", "create-org", "bench", "--credits-inr", "1000000"], env=env, cwd=ROOT))
        gateway, gateway_url = await start([GATEWAY, "serve"], env, "gateway_ready", Path(tmp, "gateway.log"))
        try:
            rows = {"simulator direct": await drive(sim_url, "sim", args.requests, args.concurrency, args.stream),
                    "through gateway": await drive(gateway_url, org["api_key"], args.requests,
                                                   args.concurrency, args.stream)}
        finally:
            for process in (gateway, sim):
                process.terminate()
                process.wait(10)
        verify = subprocess.run([GATEWAY, "ledger", "verify"], env=env, cwd=ROOT, capture_output=True, text=True)
    print(f"\n{args.requests} chat requests, concurrency {args.concurrency}, stream={args.stream}")
    print(f"{'target':<18}{'req/s':>10}{'p50 ms':>10}{'p99 ms':>10}{'failed':>8}")
    for name, row in rows.items():
        print(f"{name:<18}{row['rps']:>10.0f}{row['p50_ms']:>10.2f}{row['p99_ms']:>10.2f}{row['failures']:>8}")
    print(f"ledger verify after the run: {verify.stdout.strip()}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--stream", action="store_true")
    asyncio.run(main(parser.parse_args()))
