"""Auditing at scale: how fast, and in how much memory, `gateway ledger verify` and `replay` run
on a ledger of N requests (SQLite, or PostgreSQL with --backend postgresql), beside the limits of
the same machine.

Builds the ledger through the real append path (the group-commit writer, as the gateway appends
with a reservation per request: a CreditsHeld, then the RequestCompleted drawing on it with its
text and the HoldReleased of the rest, three events a request, over `--orgs` organizations), then
runs the operator's commands, each its own process (wall time, CPU time from wait4, peak RSS from
VmHWM): `verify` and `replay` in one process and in one per core (`--jobs`), a routine verification
from a checkpoint after 1% more traffic, and a replay of one projection; beside them two raw scans
of the same rows in a process of their own (SQLite only): the chain hash alone (sqlite3 + hashlib),
and the hash plus decoding each event (msgspec). Run it at two sizes to see whether memory grows.

    python -m bench.audit_scale [--requests 100000] [--orgs 1000] [--backend sqlite|postgresql]
                                [--ledger FILE_OR_URL] [--json FILE]

--ledger keeps the built ledger there (a SQLite file, or a PostgreSQL URL naming a schema), and
reuses it when it is already there, so a second run measures without building again.
"""

import argparse
import asyncio
import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import msgspec

from bench import ledger_append, procs
from ledger import queries
from ledger.backends import recorder_for
from ledger.events import CreditsAdded, CreditsHeld, Draw, RequestCompleted, decode_event
from ledger.recorder import GENESIS_HASH, Append, LedgerUnavailable, Recorder, chain_hash
from ledger.writer import GroupCommitWriter

SCAN_BATCH = 10_000
SCANS = ("hash", "decode")
CALLERS = 500
HELD = 2_000_000  # nano-INR reserved per request; the charge (bench.ledger_append) is drawn from it
PG_URL = "postgresql://postgres@127.0.0.1:5432/test"


def reservation(org_id: str, n: int, run: str) -> tuple[Append, Append]:
    """One request as the gateway records it with a reservation: the hold, then its charge drawn
    from it (with its text) and the rest released."""
    done = ledger_append.request_unit(org_id, n, run)
    [charge] = done.events
    assert isinstance(charge, RequestCompleted)
    key_id, hold_id = charge.key_id, f"hold_{run}_{n:09d}"
    held = CreditsHeld(hold_id=hold_id, request_id=charge.request_id, amount_inr_nano=HELD, key_id=key_id,
                       lease_us=60_000_000)
    drawn = Draw(hold_id=hold_id, amount_inr_nano=charge.charged_inr_nano, key_id=key_id)
    charge = msgspec.structs.replace(charge, draws=(drawn,))
    return Append(org_id, [held]), Append(org_id, [charge, held.released(HELD - charge.charged_inr_nano)],
                                         contents=done.contents)


async def build(recorder: Recorder, requests: int, orgs: int, start: int = 0) -> None:
    """`requests` requests over `orgs` organizations (created first unless `start`), appended as
    the gateway does, by CALLERS concurrent callers through the group-commit writer."""
    names = [f"org_audit_{n:05d}" for n in range(orgs)]
    if not start:
        await recorder.append([unit for name in names for unit in ledger_append.org_units(name)])
    writer, run, numbers = GroupCommitWriter(recorder), uuid.uuid4().hex[:8], iter(range(start, start + requests))
    writer.start()

    async def caller() -> None:
        for n in numbers:
            held, done = reservation(names[n % orgs], n, run)
            for unit in (held, done):
                if isinstance(outcome := await writer.append(unit), Exception):
                    raise outcome

    try:
        await asyncio.gather(*(caller() for _ in range(CALLERS)))
    finally:
        await writer.close()


def scan(path: Path, decode: bool) -> int:
    """Every event read in position order and its chain hash checked (and decoded): the floor a
    verification in Python stands on."""
    heads: dict[str, bytes] = {}
    db = sqlite3.connect(path)
    cursor = db.execute("SELECT position, stream_id, version, type, recorded_at_us, data, hash FROM events"
                        " ORDER BY position")
    checked = 0
    while rows := cursor.fetchmany(SCAN_BATCH):
        for position, stream_id, version, kind, recorded_at_us, data, stored in rows:
            if chain_hash(heads.get(stream_id, GENESIS_HASH), position, stream_id, version, kind,
                          recorded_at_us, data) != stored:
                raise SystemExit(f"hash mismatch at {position}")
            if decode:
                decode_event(data)
            heads[stream_id] = stored
        checked += len(rows)
    return checked


def timed(command: list[str], env: dict[str, str]) -> dict:
    """Run `command`; its wall time, CPU time (wait4, its children included) and peak RSS. The peak
    is the process's own high-water mark (VmHWM, read every 20 ms until it exits), and its
    workers' (the largest of them): wait4's ru_maxrss would start from the size a child inherits."""
    started = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    peak_kb = workers_kb = 0
    while not (ended := os.wait4(process.pid, os.WNOHANG))[0]:
        peak_kb = max(peak_kb, high_water_kb(process.pid) or 0)
        workers_kb = max([workers_kb, *(high_water_kb(child) or 0 for child in children(process.pid))])
        time.sleep(0.02)
    _, status, usage = ended
    seconds = time.perf_counter() - started
    output = process.stdout.read() if process.stdout else b""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{command} failed: {output[-500:]!r}")
    return {"seconds": round(seconds, 2), "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
            "peak_rss_mb": round(peak_kb / 1024, 1), "worker_peak_rss_mb": round(workers_kb / 1024, 1),
            "output": output.decode().strip()}


def high_water_kb(pid: int) -> int | None:
    """The process's peak resident set so far (None once it is gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    return next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:")), None)


def children(pid: int) -> list[int]:
    """The processes a process started (its pool's workers)."""
    try:
        return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def runs(url: str, path: Path | None, cores: int) -> dict[str, list[str]]:
    """What is measured, in order: name -> command."""
    gateway = [procs.GATEWAY, "ledger"]
    commands = {
        "verify, 1 process": [*gateway, "verify", "--jobs", "1"],
        f"verify, {cores} processes": [*gateway, "verify", "--jobs", str(cores)],
        "replay, 1 process": [*gateway, "replay", "--jobs", "1"],
        f"replay, {cores} processes": [*gateway, "replay", "--jobs", str(cores)],
        "replay --projection orgs": [*gateway, "replay", "--projection", "orgs", "--jobs", str(cores)],
        "verify --checkpoint": [*gateway, "verify", "--checkpoint", "--jobs", str(cores)],
    }
    if path is not None:
        commands.update({f"scan+{kind}": [procs.PYTHON, "-m", "bench.audit_scale", "--scan", kind, "--path", str(path)]
                         for kind in SCANS})
    return commands


async def events_in(url: str) -> int:
    recorder = recorder_for(url)
    await recorder.open()
    try:
        return await queries.last_position(recorder)
    finally:
        await recorder.close()


async def grow(url: str, requests: int, orgs: int, start: int) -> None:
    recorder = recorder_for(url)
    await recorder.open()
    try:
        await build(recorder, requests, orgs, start)
    finally:
        await recorder.close()


def measure(url: str, path: Path | None, requests: int, orgs: int) -> dict[str, dict]:
    env = {**os.environ, "GATEWAY_LEDGER_URL": url}
    cores = os.cpu_count() or 1
    results = {}
    for name, command in runs(url, path, cores).items():
        events = asyncio.run(events_in(url))
        result = timed(command, env)
        results[name] = {**result, "events": events, "events_per_s": round(events / result["seconds"])}
    during = asyncio.run(appending_during(url, [procs.GATEWAY, "ledger", "replay", "--jobs", str(cores)], env))
    events = asyncio.run(events_in(url))
    results[f"replay, {cores} processes, appending meanwhile"] = {
        **during, "cpu_s": 0, "peak_rss_mb": 0, "worker_peak_rss_mb": 0, "events": events,
        "events_per_s": round(events / during["seconds"])}
    extra = max(1, requests // 100)  # 1% more traffic, then the routine verification from the checkpoint
    asyncio.run(grow(url, extra, orgs, requests))
    result = timed([procs.GATEWAY, "ledger", "verify", "--incremental", "--jobs", "1"], env)
    checked = json.loads(result["output"])["events_checked"]
    results["verify --incremental (1% more)"] = {**result, "events": checked,
                                                 "events_per_s": round(checked / result["seconds"])}
    return results


async def appending_during(url: str, command: list[str], env: dict[str, str]) -> dict:
    """Run `command` while appending a small unit every 20 ms (as the gateway would go on
    charging); how long the command took and the longest any append waited."""
    recorder = recorder_for(url)
    await recorder.open()
    try:
        process = await asyncio.create_subprocess_exec(*command, env=env, stdout=asyncio.subprocess.DEVNULL,
                                                       stderr=asyncio.subprocess.DEVNULL)
        started, waits, failed = time.perf_counter(), [], 0
        while process.returncode is None:
            began = time.perf_counter()
            try:
                [outcome] = await recorder.append([Append("org_audit_00000", [CreditsAdded(amount_inr_nano=1)])])
            except LedgerUnavailable:  # waited longer than the ledger's timeout: what a client would see as 503
                failed += 1
            else:
                if isinstance(outcome, Exception):
                    raise outcome
            waits.append(time.perf_counter() - began)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(process.wait(), 0.02)
        if process.returncode:
            raise SystemExit(f"{command} failed")
        return {"seconds": round(time.perf_counter() - started, 2), "appends": len(waits) - failed,
                "appends_timed_out": failed, "longest_append_wait_s": round(max(waits), 3)}
    finally:
        await recorder.close()


def ledger_size(url: str, path: Path | None) -> int:
    if path is not None:
        return sum(file.stat().st_size for file in path.parent.iterdir() if file.name.startswith(path.name))
    return asyncio.run(_pg_size(url))


async def _pg_size(url: str) -> int:
    import asyncpg

    from ledger.backends.postgres import dsn_and_schema

    dsn, schema = dsn_and_schema(url)
    db = await asyncpg.connect(dsn)
    try:
        return int(await db.fetchval("SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c JOIN pg_namespace n"
                                     " ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'r'", schema))
    finally:
        await db.close()


async def _drop_schema(url: str) -> None:
    import asyncpg

    from ledger.backends.postgres import dsn_and_schema

    dsn, schema = dsn_and_schema(url)
    db = await asyncpg.connect(dsn)
    try:
        await db.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    finally:
        await db.close()


def report(backend: str, requests: int, events: int, size: int, built: str, results: dict[str, dict]) -> None:
    print(f"{backend} ledger: {requests:,} requests, {events:,} events, {size / 2**20:,.0f} MiB "
          f"({size / requests:,.0f} bytes per request); {built}")
    print("| run | events | seconds | CPU s | events/s | peak RSS MB (largest worker) |\n|---|---|---|---|---|---|")
    for name, r in results.items():
        print(f"| {name} | {r['events']:,} | {r['seconds']} | {r['cpu_s']} | {r['events_per_s']:,} |"
              f" {r['peak_rss_mb']} ({r['worker_peak_rss_mb']}) |")
        if "longest_append_wait_s" in r:
            print(f"|   (meanwhile {r['appends']} appends, one every 20 ms, {r['appends_timed_out']} timed out;"
                  f" the longest waited {r['longest_append_wait_s']} s) | | | | | |")


def prepared(args: argparse.Namespace, directory: str) -> tuple[str, Path | None, str]:
    """The ledger's URL (and file, for SQLite), built unless it already holds the requests."""
    if args.backend == "sqlite":
        path = Path(args.ledger or Path(directory) / "ledger.db").resolve()
        url = f"sqlite:///{path}"
    else:
        path, url = None, args.ledger or f"{PG_URL}?schema=audit_{uuid.uuid4().hex[:8]}"
    if asyncio.run(events_in(url)) >= 3 * args.requests:
        return url, path, "built before"
    started = time.perf_counter()
    asyncio.run(grow(url, args.requests, args.orgs, 0))
    seconds = time.perf_counter() - started
    return url, path, f"built in {seconds:.0f} s ({args.requests / seconds:,.0f} requests/s)"


def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="audit-scale-") as directory:
        url, path, built = prepared(args, directory)
        try:
            print(built, flush=True)
            events, size = asyncio.run(events_in(url)), ledger_size(url, path)
            results = measure(url, path, args.requests, args.orgs)
        finally:
            if path is None and not args.ledger:
                asyncio.run(_drop_schema(url))
        report(args.backend, args.requests, events, size, built, results)
    if args.json:
        Path(args.json).write_text(json.dumps({
            "backend": args.backend, "requests": args.requests, "events": events, "bytes": size, "built": built,
            "cores": os.cpu_count(),
            "runs": {name: {f: v for f, v in run.items() if f != "output"} for name, run in results.items()},
        }, indent=2) + "\n")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--orgs", type=int, default=1_000)
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--ledger", help="keep the ledger here (a file, or a PostgreSQL URL) and reuse it")
    parser.add_argument("--json", help="also write the results as JSON to this file")
    parser.add_argument("--scan", choices=SCANS, help=argparse.SUPPRESS)  # the raw scans' own process
    parser.add_argument("--path", type=Path, help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.scan:
        sys.exit(0 if scan(arguments.path, arguments.scan == "decode") else 1)
    main(arguments)
