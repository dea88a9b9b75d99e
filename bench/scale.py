"""Throughput at scale: the gateway in each configuration against a minimal fake upstream.

Starts the fake upstream (bench.fake_upstream) and `gateway serve` in each configuration (SQLite
one process, SQLite --workers 2, PostgreSQL --workers 2 when 127.0.0.1:5432 answers), with the
durable ledger, logging and metrics on as in production. Load comes from other processes only:
wrk (closed loop, one thread), bench.openloop (fixed rate) and bench.streams (SSE). Each row
reports req/s, p50/p99, the latency added over the upstream direct, and the CPU time per request
of every gateway process (supervisor and workers, utime+stime from /proc).

    python -m bench.scale [--configs sqlite1,sqlite2,pg2] [--runs c1,c32,open,stream]
                          [--duration 8] [--rate 1000] [--json bench/results/scale.json]
    python -m bench.scale --runs hold --hold-streams 10000   # RSS per open stream, one worker
"""

import argparse
import contextlib
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import orjson

from bench import ledger_check, procs, report, wrk
from bench.fake_upstream import READY_EVENT as UPSTREAM_READY

DEFAULT_JSON = Path(__file__).resolve().parent / "results" / "scale.json"
CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "benchmark prompt"}]}
CHAT_BODY = orjson.dumps(CHAT)
UPSTREAM_KEY = "bench-upstream-key"
WARMUP_S = 1
WARMUP_CONNECTIONS = 8


@dataclass(frozen=True)
class Setup:
    title: str
    backend: str  # "sqlite" | "postgres"
    workers: int


CONFIGS = {"sqlite1": Setup("SQLite, one process", "sqlite", 1),
           "sqlite2": Setup("SQLite, --workers 2", "sqlite", 2),
           "pg2": Setup("PostgreSQL, --workers 2", "postgres", 2)}
RUNS = ("c1", "c32")


@dataclass(frozen=True)
class Target:
    """What the load is aimed at: a URL, the key to use, and the process whose CPU is counted."""
    url: str
    key: str
    pid: int


def measured(target: Target, run) -> dict:
    """Run `run()` and add the target's CPU time per request answered, from /proc."""
    before = procs.cpu_seconds(target.pid)
    result = run()
    spent = procs.cpu_seconds(target.pid) - before
    return {**result, "cpu_s": round(spent, 3),
            "cpu_us_per_request": round(1e6 * spent / max(result["requests"], 1), 1)}


def closed_loop(target: Target, connections: int, duration_s: float) -> dict:
    return measured(target, lambda: wrk.run(target.url, target.key, CHAT_BODY, connections, duration_s))


def run_all(target: Target, args: argparse.Namespace) -> dict[str, dict]:
    """Every selected run against one target, after a short warm-up (kept only for the ledger check)."""
    results = {"warmup": wrk.run(target.url, target.key, CHAT_BODY, WARMUP_CONNECTIONS, WARMUP_S)}
    for name in args.runs:
        if name in ("c1", "c32"):
            results[name] = closed_loop(target, int(name[1:]), args.duration)
    return results


def gateway_toml(ledger_url: str, upstream_url: str, workers: int) -> str:
    return (f'[server]\nhost = "127.0.0.1"\nport = 0\nworkers = {workers}\n\n'
            f'[ledger]\nurl = "{ledger_url}"\n\n'
            f'[providers.openai]\nbase_url = "{upstream_url}/v1"\napi_key = "{UPSTREAM_KEY}"\n')


def create_org(config: Path) -> str:
    """A new org with plenty of credit; its API key."""
    out = subprocess.run([procs.GATEWAY, "admin", "create-org", "bench", "--credits-inr", "100000000",
                          "--config", str(config)], cwd=procs.ROOT, env=procs.clean_env(),
                         capture_output=True, text=True, check=True).stdout
    return orjson.loads(out.strip().splitlines()[-1])["api_key"]


@contextlib.contextmanager
def ledger_url(setup: Setup, tmp: Path, name: str):
    if setup.backend == "postgres":
        with ledger_check.postgres_ledger() as url:
            yield url
    else:
        yield f"sqlite:///{tmp}/{name}.db"


def bench_gateway(name: str, upstream_url: str, tmp: Path, args: argparse.Namespace) -> dict:
    """Start the gateway in one configuration, run the load, stop it, check its ledger."""
    setup = CONFIGS[name]
    with ledger_url(setup, tmp, name) as url:
        config = tmp / f"{name}.toml"
        config.write_text(gateway_toml(url, upstream_url, setup.workers))
        key = create_org(config)
        command = [procs.GATEWAY, "serve", "--config", str(config)]
        with procs.running(command, tmp / f"{name}.log", "gateway_ready", procs.clean_env()) as (process, gw_url):
            runs = run_all(Target(gw_url, key, process.pid), args)
        answered = sum(run.get("ok", 0) for run in runs.values())
        check = ledger_check.check(url, config, answered, sum(run["in_flight"] for run in runs.values()))
    return {"config": name, "title": setup.title, "workers": setup.workers, "backend": setup.backend,
            "runs": runs, "ledger": check}


def bench_direct(upstream_url: str, upstream_pid: int, args: argparse.Namespace) -> dict:
    runs = run_all(Target(upstream_url, UPSTREAM_KEY, upstream_pid), args)
    return {"config": "direct", "title": "upstream direct", "runs": runs}


def main(args: argparse.Namespace) -> int:
    if shutil.which("wrk") is None:
        sys.exit("wrk is not installed: `apt-get install -y wrk` (make bench does it)")
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp_name:
        tmp = Path(tmp_name)
        command = [procs.PYTHON, "-m", "bench.fake_upstream", "--chunks", str(args.chunks)]
        with procs.running(command, tmp / "upstream.log", UPSTREAM_READY, procs.clean_env()) as (upstream, url):
            rows.append(bench_direct(url, upstream.pid, args))
            for name in args.configs:
                rows.append(bench_gateway(name, url, tmp, args))
    result = {"machine": report.machine(), "duration_s": args.duration, "rows": rows,
              "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    print(report.table(rows))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_bytes(orjson.dumps(result, option=orjson.OPT_INDENT_2))
    print(f"\nwritten to {args.json}")
    return 0 if all(row.get("ledger", {}).get("verify_passed", True) for row in rows) else 1


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", default="sqlite1,sqlite2,pg2",
                        help="comma-separated: " + ",".join(CONFIGS) + " (pg2 is skipped without PostgreSQL)")
    parser.add_argument("--runs", default=",".join(RUNS), help="comma-separated: " + ",".join(RUNS))
    parser.add_argument("--duration", type=int, default=8, help="seconds per run (whole seconds: wrk takes no fractions)")
    parser.add_argument("--chunks", type=int, default=16, help="token chunks per streamed answer")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help="where to write the results")
    args = parser.parse_args(argv)
    args.configs = [name for name in args.configs.split(",") if name]
    args.runs = [name for name in args.runs.split(",") if name]
    unknown = [name for name in args.configs if name not in CONFIGS] + [r for r in args.runs if r not in RUNS]
    if unknown:
        parser.error(f"unknown configuration or run: {', '.join(unknown)}")
    if "pg2" in args.configs and not ledger_check.postgres_reachable():
        print("PostgreSQL is not reachable on 127.0.0.1:5432: skipping pg2", file=sys.stderr)
        args.configs.remove("pg2")
    return args


if __name__ == "__main__":
    sys.exit(main(parse_args()))
