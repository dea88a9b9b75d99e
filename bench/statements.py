"""A monthly statement at scale: how long GET /v1/statements/YYYY-MM's reads take, and in how much
memory, for one organization with N requests in one month (SQLite, or PostgreSQL).

Builds the ledger through the append path as bench.audit_scale does (the group-commit writer, a
reservation per request: the hold, the charge drawn from it with its text, the rest released),
all for one org, its requests spread evenly over January 2025 (the recorder's clock is moved on
request by request), over KEYS keys, MODELS models and two USD->INR rates. Then, in a process of
its own (wall time per read, peak RSS from VmHWM), the statement of January (every request), its
CSV, and the statement of February (its opening balance sums January).

    python -m bench.statements [--requests 1000000] [--backend sqlite|postgresql]
                               [--ledger FILE_OR_URL] [--json FILE]
"""

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import msgspec

from bench import audit_scale, ledger_append, procs
from gateway.dashboard import statements
from ledger import charges, queries
from ledger.backends import recorder_for
from ledger.events import CreditsHeld, Draw, RequestCompleted
from ledger.recorder import Append, Recorder
from ledger.writer import GroupCommitWriter

ORG = "org_statement"
KEYS, MODELS, RATES = 8, ("gpt-4o-mini", "gpt-4o", "claude-haiku", "gemini-flash"), ("84.0", "84.25")
JANUARY_US = int(datetime(2025, 1, 1, tzinfo=UTC).timestamp()) * 1_000_000
MONTH_US = 31 * 86_400_000_000
READS = 5  # each read is timed this many times; the median is reported


def varied(unit: Append, n: int) -> Append:
    """A request of the bench's shape, on one of the org's keys, models and rates (charged what its
    cost is at that rate, so its export checks: ledger.charges)."""
    [request] = unit.events
    assert isinstance(request, RequestCompleted)
    rate = RATES[(n // 7) % len(RATES)]
    inr = charges.inr_nano(request.cost_usd_nano, Decimal(rate))
    event = msgspec.structs.replace(request, key_id=f"key_{n % KEYS}", model=MODELS[n % len(MODELS)],
                                    usd_to_inr=rate, cost_inr_nano=inr, charged_inr_nano=inr)
    return Append(unit.stream_id, [event], contents=unit.contents)


def reservation(n: int, run: str) -> tuple[Append, Append]:
    """As bench.audit_scale.reservation, of a varied request: the hold, then the charge drawn from
    it (with its text) and the rest released."""
    done = varied(ledger_append.request_unit(ORG, n, run), n)
    [charge] = done.events
    assert isinstance(charge, RequestCompleted)
    hold_id = f"hold_{run}_{n:09d}"
    held = CreditsHeld(hold_id=hold_id, request_id=charge.request_id, amount_inr_nano=audit_scale.HELD,
                       key_id=charge.key_id, lease_us=60_000_000)
    charge = msgspec.structs.replace(charge, draws=(
        Draw(hold_id=hold_id, amount_inr_nano=charge.charged_inr_nano, key_id=charge.key_id),))
    return Append(ORG, [held]), Append(ORG, [charge, held.released(audit_scale.HELD - charge.charged_inr_nano)],
                                       contents=done.contents)


async def build(recorder: Recorder, requests: int) -> None:
    """The org, then `requests` requests through the group-commit writer, the clock moving evenly
    through January as they are appended."""
    done = [0]
    recorder.clock = lambda: JANUARY_US + done[0] * MONTH_US // requests
    await recorder.append(ledger_append.org_units(ORG))
    writer, run, numbers = GroupCommitWriter(recorder), uuid.uuid4().hex[:8], iter(range(requests))
    writer.start()

    async def caller() -> None:
        for n in numbers:
            for unit in reservation(n, run):
                if isinstance(outcome := await writer.append(unit), Exception):
                    raise outcome
            done[0] += 1

    try:
        await asyncio.gather(*(caller() for _ in range(audit_scale.CALLERS)))
    finally:
        await writer.close()


async def grow(url: str, requests: int) -> None:
    recorder = recorder_for(url)
    await recorder.open()
    try:
        await build(recorder, requests)
    finally:
        await recorder.close()


async def timed_reads(url: str) -> dict:
    """Each read READS times (median seconds), and what it found."""
    recorder = recorder_for(url)
    await recorder.open(migrate=False)
    try:
        january, february = statements.parse_month("2025-01"), statements.parse_month("2025-02")
        reads: dict[str, Callable[[], Awaitable[object]]] = {
            "statement 2025-01 (JSON)": lambda: statements.statement(recorder, ORG, january),
            "statement 2025-01 (CSV)": lambda: statements.charges_csv(recorder, ORG, january),
            "statement 2025-02 (JSON, opening over January)": lambda: statements.statement(recorder, ORG, february)}
        results = {name: await median_of(read) for name, read in reads.items()}
        jan = await statements.statement(recorder, ORG, january)
        org = await queries.org(recorder, ORG)
    finally:
        await recorder.close()
    return {"reads": results, "requests": jan["requests"], "charges_inr": jan["charges_inr"],
            "closing_balance_inr": jan["closing_balance_inr"], "by_key": len(jan["by_key"]),
            "by_day": len(jan["by_day"]),
            "balance_now_inr": statements.amount(org.credits_inr_nano - org.spent_inr_nano) if org else None}


async def median_of(read: Callable[[], Awaitable[object]]) -> float:
    seconds = []
    for _ in range(READS):
        started = time.perf_counter()
        await read()
        seconds.append(time.perf_counter() - started)
    return round(statistics.median(seconds), 4)


def prepared(args: argparse.Namespace, directory: str) -> tuple[str, str]:
    """The ledger's URL, built unless it already holds the requests; how it came to be."""
    if args.backend == "sqlite":
        url = f"sqlite:///{Path(args.ledger or Path(directory) / 'ledger.db').resolve()}"
    else:
        url = args.ledger or f"{audit_scale.PG_URL}?schema=statements_{uuid.uuid4().hex[:8]}"
    if asyncio.run(audit_scale.events_in(url)) >= 3 * args.requests:
        return url, "built before"
    started = time.perf_counter()
    asyncio.run(grow(url, args.requests))
    seconds = time.perf_counter() - started
    return url, f"built in {seconds:.0f} s ({args.requests / seconds:,.0f} requests/s)"


def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="statements-") as directory:
        url, built = prepared(args, directory)
        print(built, flush=True)
        try:
            result = audit_scale.timed([procs.PYTHON, "-m", "bench.statements", "--read", url], dict(os.environ))
        finally:
            if args.backend == "postgresql" and not args.ledger:
                asyncio.run(audit_scale._drop_schema(url))
    found = json.loads(result.pop("output"))
    report = {"backend": args.backend, "requests": args.requests, "built": built, "cores": os.cpu_count(),
              "process": result, **found}
    print(json.dumps(report, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")


def ledger_parser(doc: str) -> argparse.ArgumentParser:
    """The options of a benchmark of one org's month on this ledger (bench.export_scale's too)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--ledger", help="keep the ledger here (a file, or a PostgreSQL URL) and reuse it")
    parser.add_argument("--json", help="also write the results as JSON to this file")
    return parser


if __name__ == "__main__":
    parser = ledger_parser(__doc__)
    parser.add_argument("--read", help=argparse.SUPPRESS)  # the timed reads' own process
    arguments = parser.parse_args()
    if arguments.read:
        sys.exit(print(json.dumps(asyncio.run(timed_reads(arguments.read)))))
    main(arguments)
