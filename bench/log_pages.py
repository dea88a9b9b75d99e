"""How long a page of the dashboard's request log takes when the log holds millions of rows.

Fills a SQLite ledger's request_log projection directly (a read benchmark: the rows need not
come from events) with `--rows` requests of a few orgs, routes, models and statuses, then times
the gateway's own page query (gateway.dashboard.request_log.page_sql through the recorder) for the first
page, a page deep in the log and filtered pages, and the overview's rollup read; prints a table.

    python -m bench.log_pages [--rows 2000000] [--repeat 50]
"""

import argparse
import asyncio
import random
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from gateway.dashboard.request_log import page_sql, parse_query
from ledger.queries import USAGE
from ledger.backfills import BACKFILL_V5
from ledger.projections import INSERT_REQUEST, US_PER_DAY
from ledger.backends.sqlite import SQLiteRecorder

ORGS = ("org_big", "org_b", "org_c", "org_d")
ROUTES = ("/v1/chat/completions", "/v1/embeddings", "/v1/audio/speech", "/v1/messages")
MODELS = ("gpt-4o-mini", "gpt-4o", "claude-haiku-4-5", "gemini-2.5-flash", "text-embedding-3-small")
STATUSES = (200,) * 40 + (400, 402, 429, 502, 504)


def rows(first: int, count: int, start_us: int) -> list[tuple]:
    """Requests at positions first+1 .. first+count, a millisecond apart."""
    pick = random.Random(first).choice
    return [(f"req_{n:012d}", pick(ORGS), n, "key_x", start_us + n * 1000, pick(ROUTES), pick(MODELS),
             "openai", pick(STATUSES), 0, 10, 20, 4500, 378000, 378000, "84.0", 12, "", "")
            for n in range(first + 1, first + count + 1)]


def fill(path: Path, count: int) -> None:
    """The request log, then its rollup by the statements a schema upgrade fills it with."""
    db = sqlite3.connect(path)
    start_us = time.time_ns() // 1000 - count * 1000
    for first in range(0, count, 200_000):
        db.executemany(INSERT_REQUEST, rows(first, min(200_000, count - first), start_us))
        db.commit()
    for statement in BACKFILL_V5:
        db.execute(statement)
    db.execute("ANALYZE")
    db.commit()
    db.close()


async def timed(recorder: SQLiteRecorder, sql: str, params: tuple, repeat: int) -> tuple[float, float, int]:
    times, found = [], 0
    for _ in range(repeat):
        started = time.perf_counter()
        found = len(await recorder._fetch(sql, params))
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times), max(times), found


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "ledger.db"
        recorder = SQLiteRecorder(str(path))
        await recorder.open()  # the schema, with every index the gateway makes
        started = time.perf_counter()
        await asyncio.to_thread(fill, path, args.rows)
        print(f"\n{args.rows} request_log rows written in {time.perf_counter() - started:.1f} s")
        (middle,), = await recorder._fetch("SELECT position FROM request_log ORDER BY position"
                                          " LIMIT 1 OFFSET ?", (args.rows // 2,))
        cases = {
            "first page (50)": {},
            "page at mid-log": {"before": f"log_{middle}"},
            "model filter": {"model": "gpt-4o"},
            "status=502, deep": {"status": "502", "before": f"log_{middle}"},
            "route+model+status": {"route": "/v1/embeddings", "model": "gpt-4o", "status": "429"},
            "200 rows": {"limit": "200"},
        }
        print(f"{'query':<22}{'median ms':>11}{'max ms':>10}{'rows':>7}")
        for name, query in cases.items():
            median, worst, found = await timed(recorder, *page_sql("org_big", parse_query(query)), args.repeat)
            print(f"{name:<22}{median:>11.3f}{worst:>10.3f}{found:>7}")
        today = time.time_ns() // 1000 // US_PER_DAY
        median, worst, found = await timed(recorder, USAGE, ("org_big", today - 29), args.repeat)
        print(f"{'overview (30 days)':<22}{median:>11.3f}{worst:>10.3f}{found:>7}")
        await recorder.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=50)
    asyncio.run(main(parser.parse_args()))
