"""Throughput at scale: the gateway in each configuration in front of a minimal fake upstream.

Starts the fake upstream (bench.fake_upstream) and `gateway serve` in each configuration (SQLite
one process, SQLite --workers 2, PostgreSQL --workers 2 when 127.0.0.1:5432 answers), with the
durable ledger, logging and metrics on as in production; and, as the floor those stand on, a bare
aiohttp proxy (bench.bare_proxy: aiohttp's server and client and nothing else). Load comes only from other processes:
wrk (closed loop, one thread), bench.openloop (a fixed rate) and bench.streams (SSE). Each row
reports req/s, p50/p99, the latency added over the upstream direct (the first row, measured the
same way), and the CPU time per request of every gateway process (supervisor and workers,
utime+stime from /proc). After its runs each configuration's ledger is checked: one
request_completed event per 200 answered (plus at most the requests cut off in flight when a
run ended) and `gateway ledger verify` passes.

Runs: c1, c32 (closed loop, wrk), open (--rate req/s open loop), stream (SSE: time to first
event at c=1, events per second at c=32), hold (--hold-streams streams open at once through one
worker, SQLite: its RSS per stream; once, not per configuration).

    python -m bench.scale [--configs floor,sqlite1,sqlite1-noreserve,sqlite2,pg2,pg2-noreserve]
                          [--runs c1,c32,open,stream,hold]
                          [--duration 8] [--rate 1000] [--json data/bench/scale.json]
    python -m bench.scale --configs '' --runs hold [--hold-streams 10000]
"""

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import orjson

from bench import clients, gateways, hold, ledger_check, report, wrk
from bench.gateways import Target

# Gitignored (data/): a run kept as a record is committed as bench/results/scale-COMMIT.json.
DEFAULT_JSON = Path(__file__).resolve().parent.parent / "data" / "bench" / "scale.json"
RUNS = ("c1", "c32", "open", "stream", "hold")
FLOOR = "floor"
FLOOR_TITLE = "bare aiohttp proxy (floor: no auth, ledger, log or metrics)"
CONFIGS = (FLOOR, *gateways.CONFIGS)
WARMUP_S = 1
WARMUP_CONNECTIONS = 8
RUNNERS = {
    "c1": lambda t, a: {"c1": clients.closed_loop(t, 1, a.duration)},
    "c32": lambda t, a: {"c32": clients.closed_loop(t, 32, a.duration)},
    "open": lambda t, a: {"open": clients.open_loop(t, a.rate, a.duration)},
    "stream": lambda t, a: {"stream_c1": clients.streamed(t, 1, a.duration),
                            "stream_c32": clients.streamed(t, 32, a.duration)},
}


def run_all(target: Target, args: argparse.Namespace) -> dict[str, dict]:
    """Every selected run against one target, after a short warm-up (kept for the ledger check)."""
    results = {"warmup": wrk.run(target.url, target.key, clients.CHAT_BODY, WARMUP_CONNECTIONS, WARMUP_S)}
    for name in args.runs:
        if name in RUNNERS:
            results.update(RUNNERS[name](target, args))
    return results


def bench_gateway(name: str, upstream_url: str, tmp: Path, args: argparse.Namespace) -> dict:
    """One configuration: serve, run the load, stop (in-flight requests finish), check the ledger."""
    setup = gateways.CONFIGS[name]
    with gateways.prepared(name, upstream_url, tmp) as ready:
        with gateways.serving(ready) as target:
            runs = run_all(target, args)
        answered = sum(run.get("ok", 0) for run in runs.values())
        check = ledger_check.check(ready.ledger_url, ready.config, answered,
                                   sum(run.get("in_flight", 0) for run in runs.values()))
    return {"config": name, "title": setup.title, "workers": setup.workers, "backend": setup.backend,
            "runs": runs, "ledger": check}


def bench_floor(upstream_url: str, tmp: Path, args: argparse.Namespace) -> dict:
    """The bare aiohttp proxy (bench.bare_proxy): what the gateway's own work is measured above."""
    with gateways.bare_proxy(tmp, upstream_url) as target:
        return {"config": FLOOR, "title": FLOOR_TITLE, "runs": run_all(target, args)}


def bench_all(tmp: Path, args: argparse.Namespace) -> dict:
    result = {"machine": report.machine(), "duration_s": args.duration, "rate": args.rate, "rows": []}
    if args.configs:
        with gateways.fake_upstream(tmp, "upstream", "--chunks", str(args.chunks)) as (_, upstream):
            result["rows"].append({"config": "direct", "title": "upstream direct",
                                   "runs": run_all(upstream, args)})
            for name in args.configs:
                result["rows"].append(bench_floor(upstream.url, tmp, args) if name == FLOOR
                                      else bench_gateway(name, upstream.url, tmp, args))
    if "hold" in args.runs:
        result["hold"] = hold.memory_per_stream(tmp, args.hold_streams)
    result["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    return result


def main(args: argparse.Namespace) -> int:
    if shutil.which("wrk") is None:
        sys.exit("wrk is not installed: `apt-get install -y wrk` (make bench does it)")
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        result = bench_all(Path(tmp), args)
    print(report.render(result))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_bytes(orjson.dumps(result, option=orjson.OPT_INDENT_2))
    print(f"\nwritten to {args.json}")
    return 0 if report.ledgers_pass(result) else 1


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", default=",".join(CONFIGS),
                        help="comma-separated, of " + ",".join(CONFIGS) + " (pg2* skipped without PostgreSQL)")
    parser.add_argument("--runs", default=",".join(RUNS), help="comma-separated, of " + ",".join(RUNS))
    parser.add_argument("--duration", type=int, default=8, help="seconds per run (whole: wrk takes no fractions)")
    parser.add_argument("--rate", type=float, default=1000.0, help="requests per second of the open-loop run")
    parser.add_argument("--chunks", type=int, default=16, help="token chunks per streamed answer")
    parser.add_argument("--hold-streams", type=int, default=10_000, help="streams the hold run opens at once")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help="where to write the results")
    args = parser.parse_args(argv)
    args.configs = [name for name in args.configs.split(",") if name]
    args.runs = [name for name in args.runs.split(",") if name]
    unknown = [n for n in args.configs if n not in CONFIGS] + [n for n in args.runs if n not in RUNS]
    if unknown:
        parser.error(f"unknown configuration or run: {', '.join(unknown)}")
    postgres = [n for n in args.configs if n in gateways.CONFIGS and gateways.CONFIGS[n].backend == "postgres"]
    if postgres and not ledger_check.postgres_reachable():
        print(f"PostgreSQL is not reachable on 127.0.0.1:5432: skipping {', '.join(postgres)}", file=sys.stderr)
        args.configs = [n for n in args.configs if n not in postgres]
    return args


if __name__ == "__main__":
    sys.exit(main(parse_args()))
