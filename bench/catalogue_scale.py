"""The catalogue at scale: does a big catalogue slow the request path, and what does reloading
one cost (issue 38, point 5)?

Hot path: the shipped catalogue against it plus --models synthetic chat models
(bench.catalogue_synth: two provider entries each, long-context and service tiers, cache prices
with one-hour writes, batch prices), each in a `gateway serve` of its own (SQLite, one process,
as in production; `[catalogue] path`), both running at once in front of the upstream simulator
(`python -m simulator`). wrk (its own process) drives each in turn with the same POST
/v1/chat/completions (gpt-4o-mini, not streamed) for --duration seconds at c=32, the catalogues
alternating (A B A B, --rounds times) so drift shows as the spread between rounds; each run
reports req/s and the gateway's CPU per request (utime+stime from /proc), which drifts far less
than req/s on a shared machine. Beside it, in this process: `resolve("gpt-4o-mini")` and a tiered
price computation (`model_cost` at the priority tier with cache reads) on both catalogues, ns per
call (timeit, the catalogues alternating, best of 7).

Reload: a catalogue of --reload-models synthetic models (dated: price history, and a price change
one week ahead on every tenth model), measured by bench.catalogue_reload in a process of its own:
file size, parse, publish into a fresh SQLite ledger, a follower's LiveCatalogue.load, memory
(RSS growth, tracemalloc peak and retained), and GET /v1/prices/{version}.

    python -m bench.catalogue_scale [--models 500] [--reload-models 2000] [--duration 8] [--rounds 2]
                                    [--json data/bench/catalogue_scale.json]
"""

import argparse
import contextlib
import functools
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import orjson

from bench import catalogue_synth, clients, gateways, procs, report, wrk
from gateway.billing.pricing import model_cost
from gateway.catalogue import Catalogue
from gateway.providers.usage import Usage

DEFAULT_JSON = Path(__file__).resolve().parent.parent / "data" / "bench" / "catalogue_scale.json"
MODEL = "gpt-4o-mini"  # what the load asks for (bench.http_wire.CHAT)
RATE = Decimal("84")
USAGE = Usage(prompt_tokens=1200, completion_tokens=300, cached_prompt_tokens=400, service_tier="priority")
CONNECTIONS = 32
WARMUP_S = 1
SIMULATOR_KEY = "bench-simulator-key"  # the simulator checks none


def catalogues(tmp: Path, models: int) -> dict[str, Path]:
    """The two files the gateways serve: the shipped one, and it with `models` more."""
    big = tmp / "catalogue-big.json"
    big.write_bytes(catalogue_synth.catalogue(models, shipped=True))
    return {"shipped": catalogue_synth.SHIPPED_PATH, "big": big}


def micro(files: dict[str, Path], rounds: int = 7) -> dict[str, dict]:
    """ns per call of the two lookups a request makes of its catalogue, on each catalogue: timeit
    runs of each alternating, `rounds` times, the least kept (the one least disturbed by the
    machine's other work)."""
    timers: dict[tuple[str, str], tuple[timeit.Timer, int]] = {}
    result: dict[str, dict] = {}
    for name, path in files.items():
        catalogue = Catalogue.load(path)
        resolved = catalogue.resolve(MODEL)
        result[name] = {"models": len(catalogue.listing(include_deactivated=True))}
        timers[(name, "resolve_ns")] = sized(timeit.Timer(functools.partial(catalogue.resolve, MODEL)))
        priced = functools.partial(model_cost, resolved.prices, USAGE, RATE)
        timers[(name, "model_cost_ns")] = sized(timeit.Timer(priced))
    best = dict.fromkeys(timers, float("inf"))
    for _ in range(rounds):
        for key, (timer, number) in timers.items():
            best[key] = min(best[key], timer.timeit(number) / number)
    for (name, what), seconds in best.items():
        result[name][what] = round(1e9 * seconds, 1)
    return result


def sized(timer: timeit.Timer) -> tuple[timeit.Timer, int]:
    """The timer and how many calls make one run of it last 0.2 s or more."""
    return timer, timer.autorange()[0]


def gateway_toml(ledger_url: str, upstream_url: str, catalogue: Path) -> str:
    """bench.gateways' production-like configuration with both providers of the synthetic models
    on the simulator, serving `catalogue`."""
    return (gateways.gateway_toml(ledger_url, upstream_url, 1)
            + f'\n[providers.anthropic]\nbase_url = "{upstream_url}"\napi_key = "{SIMULATOR_KEY}"\n'
            + f'\n[catalogue]\npath = "{catalogue}"\n')


@contextlib.contextmanager
def gateway(name: str, catalogue: Path, upstream_url: str, tmp: Path) -> Iterator[tuple[gateways.Target, float]]:
    """`gateway serve` on a fresh ledger with one funded org: its target and seconds to ready."""
    config = tmp / f"{name}.toml"
    config.write_text(gateway_toml(f"sqlite:///{tmp}/{name}.db", upstream_url, catalogue))
    key = gateways.create_org(config)
    command = [procs.GATEWAY, "serve", "--config", str(config)]
    started = time.perf_counter()
    with procs.running(command, config.with_suffix(".log"), "gateway_ready", procs.clean_env()) as (process, url):
        yield gateways.Target(url, key, process.pid), round(time.perf_counter() - started, 2)


def hot_path(files: dict[str, Path], tmp: Path, args: argparse.Namespace) -> dict:
    """Both gateways up at once, driven in turn, --rounds times; their runs, ready times and RSS."""
    result: dict = {name: {"runs": []} for name in files}
    with gateways.simulator(tmp) as upstream, contextlib.ExitStack() as stack:
        targets = {}
        for name, path in files.items():
            targets[name], result[name]["ready_s"] = stack.enter_context(gateway(name, path, upstream, tmp))
            wrk.run(targets[name].url, targets[name].key, clients.CHAT_BODY, 8, WARMUP_S)
        for _ in range(args.rounds):
            for name, target in targets.items():
                result[name]["runs"].append(clients.closed_loop(target, CONNECTIONS, args.duration))
        for name, target in targets.items():
            result[name]["rss_kib"] = procs.rss_kib(target.pid)
    return result


def reload(tmp: Path, args: argparse.Namespace) -> dict:
    """bench.catalogue_reload on a dated catalogue of --reload-models models, in its own process."""
    path = tmp / "catalogue-reload.json"
    path.write_bytes(catalogue_synth.catalogue(args.reload_models, shipped=False, with_dates=True))
    ledgers = tmp / "reload"
    ledgers.mkdir()
    done = subprocess.run([procs.PYTHON, "-m", "bench.catalogue_reload", "--file", str(path), "--tmp", str(ledgers),
                           "--repeats", str(args.repeats)], cwd=procs.ROOT, env=procs.clean_env(),
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"bench.catalogue_reload failed ({done.returncode}): {done.stderr[-2000:]}")
    return orjson.loads(done.stdout.strip().splitlines()[-1])


def median(runs: list[dict], key: str) -> float:
    return statistics.median(run[key] for run in runs)


def each(runs: list[dict], key: str) -> str:
    return " / ".join(f"{run[key]:,.0f}" for run in runs)


HOT_HEADERS = ("catalogue", "models", "req/s c=32 (each round)", "CPU µs/req (each round)", "p50 / p99 ms",
               "errors", "ready s", "RSS MiB", "resolve ns", "model_cost ns")


def hot_row(title: str, served: dict, measured: dict) -> str:
    runs = served["runs"]
    errors = sum(run["non_2xx"] + run["socket_errors"] for run in runs)
    cells = (title, f"{measured['models']:,}", f"{median(runs, 'rps'):,.0f} ({each(runs, 'rps')})",
             f"{median(runs, 'cpu_us_per_request'):,.0f} ({each(runs, 'cpu_us_per_request')})",
             f"{median(runs, 'p50_ms'):.2f} / {median(runs, 'p99_ms'):.2f}", str(errors),
             f"{served['ready_s']:.2f}", f"{served['rss_kib'] / 1024:,.0f}",
             f"{measured['resolve_ns']:,.0f}", f"{measured['model_cost_ns']:,.0f}")
    return "| " + " | ".join(cells) + " |"


def reload_rows(r: dict) -> list[tuple[str, str]]:
    mib = 1024 * 1024

    def route(d: dict) -> str:
        return (f"{d['ms']:,.1f} ms ({d['document_ms']:,.2f} ms the document, the rest encoding"
                f" {d['bytes'] / mib:.1f} MiB)")
    return [("models (2 provider entries each)", f"{r['models']:,}"),
            ("file size", f"{r['bytes'] / mib:.1f} MiB"),
            ("Catalogue.parse", f"{r['parse_ms']:,.0f} ms"),
            ("publish into a fresh SQLite ledger", f"{r['publish_ms']:,.0f} ms ({r['switches']} switches)"),
            ("LiveCatalogue.load (follower)", f"{r['load_ms']:,.0f} ms ({r['spans_built']} switches built)"),
            ("one Catalogue: RSS growth", f"{r['rss_growth_kib'] / 1024:,.1f} MiB"),
            ("one Catalogue: tracemalloc retained / peak",
             f"{r['traced_retained_bytes'] / mib:,.1f} / {r['traced_peak_bytes'] / mib:,.1f} MiB"),
            ("GET /v1/prices/{version} in force, first", route(r["in_force_first"])),
            ("GET /v1/prices/{version} in force, again", route(r["in_force_again"])),
            ("GET /v1/prices/{version} past (read back, parsed)", route(r["past_version"]))]


def render(result: dict) -> str:
    lines = ["| " + " | ".join(HOT_HEADERS) + " |", "|---" * len(HOT_HEADERS) + "|"]
    titles = {"shipped": "shipped", "big": f"shipped + {result['models']:,} synthetic"}
    lines += [hot_row(titles[name], result["hot"][name], result["micro"][name]) for name in titles]
    note = (f"{result['duration_s']} s per run, {result['rounds']} rounds alternating, medians first; resolve and"
            f" model_cost: timeit, best of 7 alternating; model_cost: {MODEL} at the priority tier with cache reads;"
            f" {result['machine']['cpus']} CPUs")
    lines += ["", note, "", "| reload | measured |", "|---|---|"]
    lines += [f"| {what} | {value} |" for what, value in reload_rows(result["reload"])]
    return "\n".join(lines) + f"\n\nbest of {result['repeats']} for parse, publish and load"


def failures(result: dict) -> list[str]:
    """The runs that answered nothing or answered anything but 200s."""
    return [f"{name} round {n + 1}" for name, served in result["hot"].items() for n, run in enumerate(served["runs"])
            if run["ok"] == 0 or run["non_2xx"] or run["socket_errors"]]


def main(args: argparse.Namespace) -> int:
    if shutil.which("wrk") is None:
        sys.exit("wrk is not installed: `apt-get install -y wrk` (make bench does it)")
    result: dict = {"machine": report.machine(), "models": args.models, "duration_s": args.duration,
                    "rounds": args.rounds, "repeats": args.repeats}
    with tempfile.TemporaryDirectory(prefix="bench-catalogue-") as name:
        tmp = Path(name)
        files = catalogues(tmp, args.models)
        result["micro"] = micro(files)
        result["hot"] = hot_path(files, tmp, args)
        result["reload"] = reload(tmp, args)
    result["failures"] = failures(result)
    result["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    print(render(result))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_bytes(orjson.dumps(result, option=orjson.OPT_INDENT_2))
    print(f"\nwritten to {args.json}" + (f"; FAILED: {', '.join(result['failures'])}" if result["failures"] else ""))
    return 1 if result["failures"] else 0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=500, help="synthetic models added to the shipped catalogue")
    parser.add_argument("--reload-models", type=int, default=2000, help="models of the reloaded catalogue")
    parser.add_argument("--duration", type=int, default=8, help="seconds per run (whole: wrk takes no fractions)")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each catalogue, alternating")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each reload timing (the least kept)")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help="where to write the results")
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(main(parse_args()))
