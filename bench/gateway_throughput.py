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
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import aiohttp

from bench import procs


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
    env = procs.clean_env()
    with tempfile.TemporaryDirectory() as tmp:
        with procs.running([procs.PYTHON, "-m", "simulator", "--port", "0"], Path(tmp, "simulator.log"),
                           "simulator_ready", env) as (_, sim_url):
            env.update(GATEWAY_LEDGER_URL=f"sqlite:///{tmp}/bench.db", GATEWAY_SERVER_PORT="0",
                       GATEWAY_PROVIDERS_OPENAI_BASE_URL=f"{sim_url}/v1",
                       GATEWAY_PROVIDERS_OPENAI_API_KEY="sim-bench-key")
            org = json.loads(subprocess.check_output(
                [procs.GATEWAY, "admin", "create-org", "bench", "--credits-inr", "1000000"], env=env, cwd=procs.ROOT))
            with procs.running([procs.GATEWAY, "serve"], Path(tmp, "gateway.log"), "gateway_ready",
                               env) as (_, gateway_url):
                rows = {"simulator direct": await drive(sim_url, "sim", args.requests, args.concurrency, args.stream),
                        "through gateway": await drive(gateway_url, org["api_key"], args.requests,
                                                       args.concurrency, args.stream)}
        verify = subprocess.run([procs.GATEWAY, "ledger", "verify"], env=env, cwd=procs.ROOT,
                                capture_output=True, text=True)
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
