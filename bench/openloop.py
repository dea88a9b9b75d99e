"""Open-loop load: requests sent on a fixed schedule whatever the answers, in its own process.

wrk is closed-loop: a slow answer delays the next request, which hides the very queueing a user
sees (coordinated omission). Here request i is due at start + i/rate; it goes out on time over an
idle keep-alive connection (a new one while fewer than --connections are open, else it waits for
one), and its latency runs from the time it was DUE, so any wait counts. Requests still unanswered
--drain-s after the last one was due count as unfinished.

    python -m bench.openloop --url URL --key KEY [--rate 1000] [--duration 8] [--body JSON]

Prints one JSON line: scheduled, ok, non_2xx, errors, unfinished, achieved rate, p50/p99 in ms,
and whether the rate was served (no failures and >= 97% of the rate achieved).
"""

import argparse
import asyncio
import collections
import sys
import time

import orjson
import uvloop

from bench import http_wire

SERVED_SHARE = 0.97


class Pool:
    """Idle keep-alive connections, at most `limit` open; requests beyond it queue (and their
    latency, counted from their due time, shows it)."""

    def __init__(self, host: str, port: int, limit: int) -> None:
        self.host, self.port, self.limit = host, port, limit
        self.idle: list[http_wire.Connection] = []
        self.waiting: collections.deque[asyncio.Future] = collections.deque()
        self.opened = 0

    async def acquire(self) -> http_wire.Connection:
        if self.idle:
            return self.idle.pop()
        if self.opened >= self.limit:
            handed = asyncio.get_running_loop().create_future()
            self.waiting.append(handed)
            if connection := await handed:
                return connection
        self.opened += 1
        try:
            return await http_wire.connect(self.host, self.port)
        except OSError:
            self.opened -= 1
            raise

    def release(self, connection: http_wire.Connection, reusable: bool) -> None:
        if not reusable:
            connection.close()
            self.opened -= 1
        handed = connection if reusable else None  # None: the waiter opens its own
        if self.waiting:
            self.waiting.popleft().set_result(handed)
        elif reusable:
            self.idle.append(connection)


class OpenLoop:
    def __init__(self, args: argparse.Namespace) -> None:
        host, port, self.raw = http_wire.post_request(args.url.rstrip("/") + http_wire.CHAT_PATH, args.key,
                                                      args.body.encode())
        self.pool = Pool(host, port, args.connections)
        self.rate, self.total, self.drain_s = args.rate, int(args.rate * args.duration), args.drain_s
        self.latencies: list[float] = []
        self.counts: collections.Counter[str] = collections.Counter()
        self.last_done = 0.0

    async def one(self, due: float) -> None:
        try:
            connection = await self.pool.acquire()
        except OSError:
            self.counts["errors"] += 1
            return
        try:
            status = await connection.request(self.raw)
        except ConnectionError:
            self.pool.release(connection, reusable=False)
            self.counts["errors"] += 1
            return
        self.last_done = time.perf_counter()
        self.latencies.append(self.last_done - due)
        self.counts["ok" if status == 200 else "non_2xx"] += 1
        self.pool.release(connection, reusable=not connection.closed)

    async def run(self) -> dict:
        start = time.perf_counter() + 0.05  # not loop.time(): uvloop's ticks in whole milliseconds
        sent: set[asyncio.Task] = set()
        for i in range(self.total):
            due = start + i / self.rate
            if (ahead := due - time.perf_counter()) > 0:
                await asyncio.sleep(ahead)
            sent.add(asyncio.create_task(self.one(due)))
        _, unfinished = await asyncio.wait(sent, timeout=self.drain_s)
        for task in unfinished:
            task.cancel()
        self.counts["unfinished"] = len(unfinished)
        return self.summary(start)

    def summary(self, start: float) -> dict:
        self.latencies.sort()
        ok = self.counts["ok"]
        achieved = ok / (self.last_done - start) if ok else 0.0
        failures = self.counts["non_2xx"] + self.counts["errors"] + self.counts["unfinished"]
        ms = lambda fraction: round(1000 * (http_wire.percentile(self.latencies, fraction) or 0), 3)  # noqa: E731
        return {"rate": self.rate, "scheduled": self.total, "requests": ok + self.counts["non_2xx"], "ok": ok,
                "non_2xx": self.counts["non_2xx"], "errors": self.counts["errors"],
                "unfinished": self.counts["unfinished"], "achieved_rps": round(achieved, 1),
                "p50_ms": ms(0.50), "p90_ms": ms(0.90), "p99_ms": ms(0.99), "max_ms": ms(1.0),
                "connections_opened": self.pool.opened,
                "served": failures == 0 and achieved >= SERVED_SHARE * self.rate}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="base URL, e.g. http://127.0.0.1:8080")
    parser.add_argument("--key", required=True)
    parser.add_argument("--rate", type=float, default=1000.0, help="requests per second")
    parser.add_argument("--duration", type=float, default=8.0, help="seconds of sending")
    parser.add_argument("--connections", type=int, default=512, help="most connections open at once")
    parser.add_argument("--drain-s", type=float, default=15.0, help="wait for answers after the last send")
    parser.add_argument("--body", default=orjson.dumps(http_wire.CHAT).decode())
    return parser.parse_args(argv)


def main() -> None:
    result = uvloop.run(OpenLoop(parse_args()).run())
    sys.stdout.write(orjson.dumps(result).decode() + "\n")


if __name__ == "__main__":
    main()
