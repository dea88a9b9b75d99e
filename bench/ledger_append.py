"""How many events per second the ledger appends through its group-commit writer.

Many concurrent callers (as many requests in flight) each append RequestCompleted units, with
the request's text as a content row, as the gateway does for a chat completion, through one
GroupCommitWriter: on SQLite (WAL, synchronous=FULL, a file in a temporary directory) and on
PostgreSQL when it is reachable (in a throwaway schema, dropped afterwards). Prints events/s,
the number of commits and the mean batch; nothing is weakened (every append is durable on
return, holds and chains as in production).

    python -m bench.ledger_append [--events 200000] [--callers 2000] [--orgs 16]
        [--backends sqlite,postgresql] [--postgres-dsn postgresql://postgres@127.0.0.1:5432/test]
        [--json FILE]
"""

import argparse
import asyncio
import hashlib
import json
import tempfile
import time
import uuid
from decimal import Decimal
from pathlib import Path

from bench import ledger_check
from ledger import charges
from ledger.events import ApiKeyCreated, CreditsAdded, OrgCreated, RequestCompleted
from ledger.recorder import Append, Content, Recorder
from ledger.writer import GroupCommitWriter

TARGETS = {"sqlite": 50_000, "postgresql": 30_000}  # events/s, issue 13
TEXT = b'{"messages":[{"role":"user","content":"benchmark prompt"}],"completion":"a short answer"}'


def org_units(org_id: str) -> list[Append]:
    key_hash = hashlib.sha256(org_id.encode()).hexdigest()
    return [Append(org_id, [OrgCreated(name=org_id, retention="retain"),
                            CreditsAdded(amount_inr_nano=10**18),
                            ApiKeyCreated(key_id=f"key_{org_id}", key_hash=key_hash, prefix="sk-ben",
                                          name="bench", admin=False)])]


# What gpt-4o-mini's 12 prompt and 16 completion tokens are priced at: 11,400 nano-USD, as recorded.
GPT_4O_MINI = charges.per_token(Decimal("0.00000015"), Decimal("0.0000006"))


def request_unit(org_id: str, n: int, run: str) -> Append:
    """One chat completion's unit: its charge and its text, like gateway.billing.charging.record."""
    request_id = f"req_{run}_{n:09d}"
    content = Content(f"cnt_{run}_{n:09d}", TEXT, hashlib.sha256(TEXT).hexdigest())
    event = RequestCompleted(
        request_id=request_id, key_id=f"key_{org_id}", route="/v1/chat/completions", model="gpt-4o-mini",
        provider="openai", status=200, prompt_tokens=12, completion_tokens=16, cost_usd_nano=11_400,
        cost_inr_nano=957_600, charged_inr_nano=957_600, usd_to_inr="84.0", latency_ms=3,
        content_id=content.content_id, content_hash=content.sha256, priced=GPT_4O_MINI)
    return Append(org_id, [event], contents=[content])


async def drive(recorder: Recorder, events: int, callers: int, orgs: list[str]) -> dict:
    """Append `events` units from `callers` concurrent tasks; the time from first to last."""
    writer = GroupCommitWriter(recorder)
    writer.start()
    run = uuid.uuid4().hex[:8]
    # Built before the clock starts: a request's own work is the gateway's, not the ledger's.
    units = iter([request_unit(orgs[n % len(orgs)], n, run) for n in range(events)])

    async def caller() -> None:
        for unit in units:
            await writer.append(unit)

    started = time.perf_counter()
    try:
        await asyncio.gather(*(caller() for _ in range(callers)))
        seconds = time.perf_counter() - started
    finally:
        await writer.close()
    return {"events": events, "seconds": round(seconds, 3), "events_per_s": round(events / seconds),
            "commits": writer.batches, "mean_batch": round(events / max(writer.batches, 1), 1),
            "largest_batch": writer.largest_batch}


async def measure(recorder: Recorder, args: argparse.Namespace) -> dict:
    await recorder.open()
    try:
        orgs = [f"org_bench_{n:03d}" for n in range(args.orgs)]
        await recorder.append([unit for org_id in orgs for unit in org_units(org_id)])
        await drive(recorder, min(args.events, 5_000), args.callers, orgs)  # warm caches and the file
        return await drive(recorder, args.events, args.callers, orgs)
    finally:
        await recorder.close()


async def on_sqlite(args: argparse.Namespace) -> dict:
    from ledger.backends.sqlite import SQLiteRecorder

    with tempfile.TemporaryDirectory(prefix="ledger-append-") as directory:
        return await measure(SQLiteRecorder(str(Path(directory) / "ledger.db")), args)


async def on_postgresql(args: argparse.Namespace) -> dict | None:
    if not ledger_check.postgres_reachable(args.postgres_dsn):
        return None
    from ledger.backends.postgres import PostgresRecorder

    schema = f"bench_append_{uuid.uuid4().hex[:10]}"
    try:
        return await measure(PostgresRecorder(args.postgres_dsn, schema), args)
    finally:
        await ledger_check.drop_schema(schema, args.postgres_dsn)


async def main(args: argparse.Namespace) -> None:
    runs = {"sqlite": on_sqlite, "postgresql": on_postgresql}
    results = {}
    print(f"{'backend':<12}{'events':>9}{'seconds':>9}{'events/s':>10}{'target':>9}{'commits':>9}{'mean batch':>12}")
    for backend in args.backends.split(","):
        result = await runs[backend](args)
        if result is None:
            print(f"{backend:<12} not reachable at {args.postgres_dsn}: skipped")
            continue
        results[backend] = {**result, "target_events_per_s": TARGETS[backend]}
        print(f"{backend:<12}{result['events']:>9}{result['seconds']:>9.2f}{result['events_per_s']:>10}"
              f"{TARGETS[backend]:>9}{result['commits']:>9}{result['mean_batch']:>12}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--callers", type=int, default=2_000, help="concurrent appenders (requests in flight)")
    parser.add_argument("--orgs", type=int, default=16)
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--postgres-dsn", default=ledger_check.POSTGRES_DSN)
    parser.add_argument("--json", help="also write the results as JSON to this file")
    asyncio.run(main(parser.parse_args()))
