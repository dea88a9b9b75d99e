"""An organization's export at scale: GET /v1/ledger/events (gateway ledger export) of one org with
N requests in a month, and the offline check of it (gateway ledger check-export), each in a
process of its own (wall and CPU time, peak RSS from VmHWM).

The ledger is bench.statements' (built through the append path, three events a request, or reused
with --ledger). Measured: the whole export written to a file, as the CLI and the route stream it
a page at a time; a page of 1,000 from late in the stream (`?after=`), and a day (`?from=&to=`),
which find where they start by bisecting versions; the check of the whole file.

    python -m bench.export_scale [--requests 1000000] [--backend sqlite|postgresql]
                                 [--ledger FILE_OR_URL] [--json FILE]
"""

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from bench import audit_scale, procs, statements
from ledger import export, export_check
from ledger.backends import recorder_for
from ledger.recorder import Recorder

DAY_US = 86_400_000_000


async def whole(url: str, path: str) -> dict:
    """The org's whole export into `path`."""
    recorder = recorder_for(url)
    await recorder.open(migrate=False)
    lines = size = 0
    try:
        with open(path, "wb") as out:  # noqa: ASYNC230 (a process of its own, nothing else on its loop)
            async for page in export.lines(recorder, statements.ORG):
                out.write(page)
                lines, size = lines + page.count(b"\n"), size + len(page)
    finally:
        await recorder.close()
    return {"lines": lines, "mib": round(size / 2**20, 1)}


async def parts(url: str) -> dict:
    """A late page by position and one day by time: how long each takes to find and read."""
    recorder = recorder_for(url)
    await recorder.open(migrate=False)
    try:
        [(last, head)] = await recorder._fetch("SELECT MAX(position), MAX(version) FROM events WHERE stream_id = ?",
                                               [statements.ORG])
        [(middle,)] = await recorder._fetch("SELECT recorded_at_us FROM events WHERE stream_id = ? AND version = ?",
                                            [statements.ORG, head // 2])
        day = middle - middle % DAY_US
        windows = {"page of 1000 after a late position": export.Window(after=last - 5_000, limit=1_000),
                   "the day of the middle event": export.Window(from_us=day, to_us=day + DAY_US)}
        return {name: await _timed_window(recorder, window) for name, window in windows.items()}
    finally:
        await recorder.close()


async def _timed_window(recorder: Recorder, window: export.Window) -> dict:
    started, lines = time.perf_counter(), 0
    async for page in export.lines(recorder, statements.ORG, window):
        lines += page.count(b"\n")
    return {"seconds": round(time.perf_counter() - started, 4), "lines": lines}


def checked(path: str) -> dict:
    report = export_check.check_file(path)
    return {key: report[key] for key in ("events", "requests", "charges_recomputed", "balance_inr", "held_inr")}


def step(name: str, *args: str) -> dict:
    """One step in a process of its own: its output, wall and CPU seconds, peak RSS."""
    result = audit_scale.timed([procs.PYTHON, "-m", "bench.export_scale", "--step", name, *args], dict(os.environ))
    return {**json.loads(result.pop("output")), **result}


def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="export-") as directory:
        url, built = statements.prepared(args, directory)
        print(built, flush=True)
        path = str(Path(directory) / "export.ndjson")
        try:
            exported = step("whole", url, path)
            found = step("parts", url)
            check = step("check", path)
        finally:
            if args.backend == "postgresql" and not args.ledger:
                asyncio.run(audit_scale._drop_schema(url))
    rate = lambda result: round(exported["lines"] / result["seconds"])  # noqa: E731
    report = {"backend": args.backend, "requests": args.requests, "built": built, "cores": os.cpu_count(),
              "export": {**exported, "lines_per_s": rate(exported)}, "parts": found,
              "check": {**check, "lines_per_s": rate(check)}}
    print(json.dumps(report, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")


def run_step(name: str, args: list[str]) -> dict:
    match name:
        case "whole":
            return asyncio.run(whole(*args))
        case "parts":
            return asyncio.run(parts(*args))
    return checked(*args)


if __name__ == "__main__":
    parser = statements.ledger_parser(__doc__)
    parser.add_argument("--step", nargs="+", help=argparse.SUPPRESS)  # one measured step's own process
    arguments = parser.parse_args()
    if arguments.step:
        sys.exit(print(json.dumps(run_step(arguments.step[0], arguments.step[1:]))))
    main(arguments)
