"""Batches through the gateway (issue 39, point 7): how fast a chat batch runs, what it costs the
gateway per line, whether its memory stays flat in the batch's size, and whether a kill -9 in the
middle loses or doubles anything.

The upstream simulator (`python -m simulator`) and each `gateway serve` are processes of their
own; the openai SDK (this process) uploads the input (`files.create(purpose="batch")`), creates
the batch and polls it until it ends. Every run has a fresh gateway on a fresh ledger (SQLite in a
temp dir, or `--ledger postgres`: a schema of its own in bench.ledger_check's database), so its
peak RSS (VmHWM from /proc/<pid>/status) is the batch's alone. Per path (bench.batch_runs:
`gateway-run` on gemini-2.5-flash, `native` on gpt-4o-mini) and batch size (--sizes):

  lines/s         lines ÷ seconds from the batch created (create answered) to completed (seen by
                  a poll every 0.2 s), so it includes the runner finding the new batch (it looks
                  every second: gateway.batches.running.TICK_S), which weighs on small batches;
                  a native batch also waits for the gateway's polls (`[batches] poll_interval_s`);
  CPU ms/line     utime+stime of the gateway's process (/proc/<pid>/stat) from before the create
                  (which reads and checks every line) to completed, ÷ lines;
  peak RSS        the gateway's VmHWM at the end (start-up included);
  events/line     events appended to the ledger from the upload to completed, ÷ lines.

Then bench.batch_kill's kill -9 runs (--kill-lines lines, --kill-text in each line's message,
e.g. a simulator latency directive). Every row is checked: every custom_id exactly once across
the output and error files, each line charged once in the ledger, `gateway ledger verify`, and
the upstream batches the simulator was asked for. Nothing is timed against a threshold.

    python -m bench.batches [--sizes 5000,50000] [--concurrency 64] [--poll-interval 0.5]
                            [--kill-lines 5000] [--kill-text ""] [--ledger sqlite|postgres]
                            [--json data/bench/batches.json]
"""

import argparse
import sys
import tempfile
import time
from pathlib import Path

import orjson

from bench import batch_kill, batch_ledger, batch_runs, gateways, procs, report
from bench.batch_runs import Settings

DEFAULT_JSON = Path(__file__).resolve().parent.parent / "data" / "bench" / "batches.json"
MIB = 1024


def timed(target: gateways.Target, ledger_url: str, data: bytes, deadline_s: float) -> dict:
    """One batch through a running gateway: its timings, the gateway's CPU and memory, its files."""
    client, start = batch_runs.sdk(target), batch_ledger.last_position(ledger_url)
    file_id = batch_runs.upload(client, data)
    cpu_before, began = sum(procs.cpu_seconds(target.pid)), time.perf_counter()
    batch_id = batch_runs.create(client, file_id)
    created = time.perf_counter()
    batch = batch_runs.wait_ended(client, batch_id, deadline_s)
    ended, cpu = time.perf_counter(), sum(procs.cpu_seconds(target.pid)) - cpu_before
    return {"batch_id": batch_id, "status": batch.status, "create_s": round(created - began, 3),
            "run_s": round(ended - created, 3), "cpu_s": round(cpu, 3), "peak_rss_kib": procs.peak_rss_kib(target.pid),
            "named": batch_runs.outcome_ids(client, batch), "events": batch_ledger.events_after(ledger_url, start)}


def measured(settings: Settings, path: str, lines: int) -> dict:
    """A batch of `lines` on `path` through a fresh gateway; a row of the table."""
    ids, data = batch_runs.custom_ids(lines), batch_runs.chat_lines(batch_runs.PATHS[path], lines)
    upstream_before = batch_runs.upstream_ids(settings.sim_url)
    with batch_runs.prepared(settings, f"{path}-{lines}") as ready:
        with gateways.serving(ready) as target:
            run = timed(target, ready.ledger_url, data, settings.deadline_s)
        checks = batch_runs.ledger_checks(ready, run["batch_id"], ids)
    return {"title": path, "path": path, "lines": lines, "kill": False, **run, **checks,
            "upstream_batches": len(batch_runs.upstream_ids(settings.sim_url) - upstream_before),
            "files": batch_runs.each_once(run.pop("named"), ids),
            "lines_per_s": round(lines / run["run_s"], 1), "cpu_ms_per_line": round(1000 * run["cpu_s"] / lines, 3),
            "events_per_line": round(run["events"] / lines, 3)}


def verdict(ok: bool) -> str:
    return "yes" if ok else "**NO**"


def row_ok(row: dict) -> bool:
    return (row["status"] == "completed" and row["files"]["ok"] and row["charged_once"]["ok"]
            and row["recorded"] == row["lines"] and row["verify_passed"]
            and row["upstream_batches"] == (1 if row["path"] == "native" else 0))


def killed_at(row: dict) -> str:
    return "; ".join(f"{k['recorded']:,}" + (" (ended)" if k["ended"] else "") for k in row.get("kills", [])) or "—"


COLUMNS = (("run", lambda r: r["title"]), ("lines", lambda r: f"{r['lines']:,}"),
           ("lines/s", lambda r: report.number(r.get("lines_per_s"))),
           ("create s", lambda r: report.number(r.get("create_s"), 2)),
           ("CPU ms/line", lambda r: report.number(r.get("cpu_ms_per_line"), 3)),
           ("peak RSS MiB", lambda r: report.number(r["peak_rss_kib"] / MIB if "peak_rss_kib" in r else None)),
           ("events/line", lambda r: f"{r['events_per_line']:.3f}"),
           ("killed at (lines recorded)", killed_at),
           ("each custom_id once", lambda r: verdict(r["files"]["ok"])),
           ("charged once", lambda r: verdict(r["charged_once"]["ok"] and r["recorded"] == r["lines"])),
           ("ledger verify", lambda r: verdict(r["verify_passed"])),
           ("upstream batches", lambda r: str(r["upstream_batches"])))


def render(result: dict) -> str:
    lines = ["| " + " | ".join(name for name, _ in COLUMNS) + " |", "|---" * len(COLUMNS) + "|"]
    lines += ["| " + " | ".join(cell(row) for _, cell in COLUMNS) + " |" for row in result["rows"]]
    note = (f"{result['ledger']} ledger; [batches] concurrency {result['concurrency']}, poll_interval_s "
            f"{result['poll_interval_s']}; {result['machine']['cpus']} CPUs; kill rows: lines/s, CPU and RSS span "
            "several gateway processes, so they are not given")
    return "\n".join(lines) + "\n\n" + note


def measured_rows(settings: Settings, sizes: list[int]) -> list[dict]:
    return [measured(settings, path, lines) for path in batch_runs.PATHS for lines in sizes]


def main(args: argparse.Namespace) -> int:
    result: dict = {"machine": report.machine(), "ledger": args.ledger, "concurrency": args.concurrency,
                    "poll_interval_s": args.poll_interval, "sizes": args.sizes, "kill_lines": args.kill_lines}
    with tempfile.TemporaryDirectory(prefix="bench-batches-") as name, gateways.simulator(Path(name)) as sim_url:
        settings = Settings(sim_url, Path(name), args.ledger, args.concurrency, args.poll_interval, args.deadline)
        result["rows"] = measured_rows(settings, args.sizes)
        result["rows"] += [batch_kill.run(settings, path, args.kill_lines, args.kill_text) for path in args.kill_paths]
    result["failures"] = [f"{row['title']} ({row['lines']:,} lines)" for row in result["rows"] if not row_ok(row)]
    result["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    print(render(result))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_bytes(orjson.dumps(result, option=orjson.OPT_INDENT_2))
    print(f"\nwritten to {args.json}" + (f"; FAILED: {', '.join(result['failures'])}" if result["failures"] else ""))
    return 1 if result["failures"] else 0


def sizes(text: str) -> list[int]:
    return [int(size) for size in text.split(",") if size.strip()]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=sizes, default=[5000, 50000],
                        help="batch sizes, comma-separated (at most 50,000)")
    parser.add_argument("--concurrency", type=int, default=64, help="[batches] concurrency")
    parser.add_argument("--poll-interval", type=float, default=0.5, help="[batches] poll_interval_s")
    parser.add_argument("--kill-lines", type=int, default=5000, help="lines of each kill -9 run's batch")
    parser.add_argument("--kill-text", default="", help="each kill line's message text, e.g. [sim:latency_ms=100]")
    parser.add_argument("--kill-paths", type=lambda text: text.split(",") if text else [],
                        default=list(batch_runs.PATHS), help="paths given a kill -9 run (empty: none)")
    parser.add_argument("--ledger", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--deadline", type=float, default=1800.0, help="seconds any one wait may take")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help="where to write the results")
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(main(parse_args()))
