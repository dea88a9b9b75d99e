"""Streamed chat load (SSE), in its own process.

closed: --connections keep-alive connections each send streamed requests back to back for
        --duration seconds; reports the time to the first SSE event (p50/p99), the whole stream's
        time, and SSE events relayed per second.
hold:   opens --connections streams at once and keeps them open (asking bench.fake_upstream to
        hold them with `[hold]` in the prompt); prints {"streams_open": N} once each has its first event,
        then keeps them until stdin closes, so the caller can read the gateway's memory meanwhile.

    python -m bench.streams --url URL --key KEY [--mode closed|hold] [--connections 32] [--duration 8]
                            [--body '{"model": "bedrock/...", "max_tokens": 256}']

--body's fields are laid over the request's (http_wire.CHAT, streamed, the prompt above), so one
generator drives any chat model the gateway serves.
"""

import argparse
import asyncio
import sys
import time

import orjson
import uvloop

from bench import http_wire, procs
from bench.fake_upstream import HOLD_MARK

OPENING_AT_ONCE = 200  # connects in flight at once while opening many streams (listen backlogs)


class StreamCounter:
    """The events of one streamed answer as its body arrives: when the first came, how many."""

    def __init__(self) -> None:
        self.first_at = 0.0
        self.events = 0
        self.tail = b""

    def __call__(self, data: bytes) -> None:
        if not self.first_at and b"data:" in data:
            self.first_at = time.perf_counter()
        self.events += (self.tail + data).count(b"\n\n")  # an event's end may straddle two pieces
        self.tail = data[-1:]


def raw_request(args: argparse.Namespace) -> tuple[str, int, bytes]:
    prompt = "benchmark prompt" + (f" {HOLD_MARK.decode()}" if args.mode == "hold" else "")
    base = {**http_wire.CHAT, "stream": True, "messages": [{"role": "user", "content": prompt}]}
    body = orjson.dumps({**base, **orjson.loads(args.body)})
    return http_wire.post_request(args.url.rstrip("/") + http_wire.CHAT_PATH, args.key, body)


async def closed(args: argparse.Namespace) -> dict:
    host, port, raw = raw_request(args)
    first, whole, counts = [], [], {"ok": 0, "non_2xx": 0, "errors": 0, "events": 0}
    stop_at = time.perf_counter() + args.duration

    async def client() -> None:
        connection = await http_wire.connect(host, port)
        while time.perf_counter() < stop_at and not connection.closed:
            counter, started = StreamCounter(), time.perf_counter()
            try:
                status = await connection.request(raw, counter)
            except ConnectionError:
                counts["errors"] += 1
                return
            whole.append(time.perf_counter() - started)
            first.append(counter.first_at - started if counter.first_at else whole[-1])
            counts["ok" if status == 200 else "non_2xx"] += 1
            counts["events"] += counter.events
        connection.close()

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(args.connections)))
    elapsed = time.perf_counter() - started
    return {**counts, "requests": counts["ok"] + counts["non_2xx"], "connections": args.connections,
            "in_flight": args.connections, "rps": round(len(whole) / elapsed, 1),
            "events_per_s": round(counts["events"] / elapsed, 1),
            **milliseconds("ttft", first), **milliseconds("stream", whole)}


def milliseconds(name: str, seconds: list[float]) -> dict:
    seconds.sort()
    return {f"{name}_{label}_ms": round(1000 * (http_wire.percentile(seconds, fraction) or 0), 3)
            for label, fraction in (("p50", 0.5), ("p99", 0.99))}


async def hold(args: argparse.Namespace) -> dict:
    """Open the streams, report once all have their first event, keep them until stdin closes."""
    host, port, raw = raw_request(args)
    gate = asyncio.Semaphore(OPENING_AT_ONCE)
    connections, answers = [], []

    async def open_one() -> None:
        async with gate:
            connection = await http_wire.connect(host, port)
            connections.append(connection)
            counter = StreamCounter()
            answers.append(connection.request(raw, counter))
            while not counter.first_at and not connection.closed:
                await asyncio.sleep(0.05)

    started = time.perf_counter()
    results = await asyncio.gather(*(open_one() for _ in range(args.connections)), return_exceptions=True)
    failed = [repr(r) for r in results if isinstance(r, BaseException)]
    report = {"streams_open": sum(not c.closed for c in connections), "failed": len(failed),
              "first_failure": failed[0] if failed else None,
              "opening_s": round(time.perf_counter() - started, 2)}
    sys.stdout.write(orjson.dumps(report).decode() + "\n")
    sys.stdout.flush()
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)  # until the caller is done
    for answer in answers:
        answer.cancel()  # never awaited: the streams are cut, not finished
    for connection in connections:
        connection.close()
    return report


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="base URL, e.g. http://127.0.0.1:8080")
    parser.add_argument("--key", required=True)
    parser.add_argument("--mode", choices=("closed", "hold"), default="closed")
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--duration", type=float, default=8.0, help="seconds (closed mode)")
    parser.add_argument("--body", default="{}", help="a JSON object of fields laid over the request's")
    return parser.parse_args(argv)


def main() -> None:
    args = parse_args()
    procs.raise_open_files(args.connections + procs.SPARE_FILES)  # one descriptor per stream held
    if args.mode == "hold":
        uvloop.run(hold(args))
    else:
        sys.stdout.write(orjson.dumps(uvloop.run(closed(args))).decode() + "\n")


if __name__ == "__main__":
    main()
