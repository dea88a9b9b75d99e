"""Auditing at scale: how fast, and in how much memory, `gateway ledger verify` and `replay` run
on a SQLite ledger of N requests, beside the limits of the same machine.

Builds the ledger through the real append path (the group-commit writer, as the gateway appends:
a RequestCompleted and its text per request, bench.ledger_append's units, spread over `--orgs`
organizations), then times `gateway ledger verify` and `gateway ledger replay` as the operator
runs them (each its own process; its peak RSS, VmHWM), and beside them two raw scans
of the same rows in a process of their own: the chain hash alone (sqlite3 + hashlib), and the
hash plus decoding each event (msgspec). Run it at two sizes to see whether memory grows with
the ledger.

    python -m bench.audit_scale [--requests 100000] [--orgs 1000] [--json FILE]
"""

import argparse
import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import ledger_append, procs
from ledger.backends.sqlite import SQLiteRecorder
from ledger.events import decode_event
from ledger.recorder import GENESIS_HASH, chain_hash

SCAN_BATCH = 10_000
SCANS = ("hash", "decode")


async def build(path: Path, requests: int, orgs: int) -> None:
    """The ledger of `requests` requests over `orgs` organizations, appended as the gateway does."""
    recorder = SQLiteRecorder(str(path))
    await recorder.open()
    try:
        names = [f"org_audit_{n:05d}" for n in range(orgs)]
        await recorder.append([unit for name in names for unit in ledger_append.org_units(name)])
        await ledger_append.drive(recorder, requests, 500, names)
    finally:
        await recorder.close()


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
    """Run `command`; its wall time, CPU time (wait4) and peak RSS. The peak is the process's own
    high-water mark (VmHWM, read every 20 ms until it exits): wait4's ru_maxrss would start from
    this process's size, which a child inherits at fork."""
    started = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    peak_kb = 0
    while not (ended := os.wait4(process.pid, os.WNOHANG))[0]:
        peak_kb = max(peak_kb, high_water_kb(process.pid) or 0)
        time.sleep(0.02)
    _, status, usage = ended
    seconds = time.perf_counter() - started
    output = process.stdout.read() if process.stdout else b""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{command} failed: {output[-500:]!r}")
    return {"seconds": round(seconds, 2), "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
            "peak_rss_mb": round(peak_kb / 1024, 1)}


def high_water_kb(pid: int) -> int | None:
    """The process's peak resident set so far (None once it is gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    return next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:")), None)


def measure(path: Path, events: int) -> dict[str, dict]:
    env = {**os.environ, "GATEWAY_LEDGER_URL": f"sqlite:///{path}"}
    runs = {
        "verify": [procs.GATEWAY, "ledger", "verify"],
        "replay": [procs.GATEWAY, "ledger", "replay"],
        **{f"scan+{kind}": [procs.PYTHON, "-m", "bench.audit_scale", "--scan", kind, "--path", str(path)]
           for kind in SCANS},
    }
    results = {}
    for name, command in runs.items():
        result = timed(command, env)
        results[name] = {**result, "events_per_s": round(events / result["seconds"])}
    return results


def count_events(path: Path) -> int:
    with sqlite3.connect(path) as db:
        [(events,)] = db.execute("SELECT count(*) FROM events").fetchall()
    return int(events)


def report(requests: int, events: int, size: int, results: dict[str, dict]) -> None:
    print(f"SQLite ledger: {requests:,} requests, {events:,} events, {size / 2**20:,.0f} MiB "
          f"({size / requests:,.0f} bytes per request)")
    print("| run | seconds | CPU s | events/s | peak RSS MB |\n|---|---|---|---|---|")
    for name, result in results.items():
        print(f"| {name} | {result['seconds']} | {result['cpu_s']} | {result['events_per_s']:,} |"
              f" {result['peak_rss_mb']} |")


def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="audit-scale-") as directory:
        path = Path(directory) / "ledger.db"
        started = time.perf_counter()
        asyncio.run(build(path, args.requests, args.orgs))
        built_s = time.perf_counter() - started
        events = count_events(path)
        size = sum(file.stat().st_size for file in Path(directory).iterdir())
        print(f"built in {built_s:.1f} s ({args.requests / built_s:,.0f} requests/s)")
        results = measure(path, events)
        report(args.requests, events, size, results)
    if args.json:
        Path(args.json).write_text(json.dumps({"requests": args.requests, "events": events, "bytes": size,
                                               "build_s": round(built_s, 1), "runs": results}, indent=2) + "\n")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--orgs", type=int, default=1_000)
    parser.add_argument("--json", help="also write the results as JSON to this file")
    parser.add_argument("--scan", choices=SCANS, help=argparse.SUPPRESS)  # the raw scans' own process
    parser.add_argument("--path", type=Path, help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.scan:
        sys.exit(0 if scan(arguments.path, arguments.scan == "decode") else 1)
    main(arguments)
