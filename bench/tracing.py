"""What traces cost a request: one gateway configuration (SQLite, one process, as in production:
durable ledger, logs, metrics) with traces off and on, side by side in one run, in front of the
fake upstream, with an OTLP collector that keeps nothing (bench.otlp_sink) when on. Load comes
from wrk (its own process); each row reports req/s, p50/p99 and the gateway's CPU time per request
(utime+stime from /proc), which drifts far less than req/s on a shared machine, split into its
event loop's (the requests, and with traces on their spans) and its other threads' (the SQLite
ledger's and, with traces on, the SDK's exporter, which encodes and sends the spans). The modes
are run alternately, `--rounds` times each, so drift shows as the spread between rounds of one.

    python -m bench.tracing [--duration 8] [--rounds 2] [--json data/bench/tracing.json]
"""

import argparse
import contextlib
import shutil
import statistics
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import orjson

from bench import clients, gateways, procs, report, wrk
from bench.otlp_sink import READY_EVENT as SINK_READY

DEFAULT_JSON = Path(__file__).resolve().parent.parent / "data" / "bench" / "tracing.json"
# Traces off; on, every request (the SDK's default sampler); on, one trace in ten sampled by the
# standard variables (OTEL_TRACES_SAMPLER), as a busy deployment samples.
MODES = ("off", "on", "on-10%")
SAMPLED = {"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.1"}
WARMUP_S = 1


@contextlib.contextmanager
def otlp_sink(tmp: Path) -> Iterator[str]:
    with procs.running([procs.PYTHON, "-m", "bench.otlp_sink"], tmp / "sink.log", SINK_READY,
                       procs.clean_env()) as (_, url):
        yield url


@contextlib.contextmanager
def gateway(mode: str, upstream_url: str, sink_url: str, tmp: Path, n: int) -> Iterator[gateways.Target]:
    """SQLite, one process, on a fresh ledger; traces sent to the sink when `mode` is on."""
    config = tmp / f"{mode}-{n}.toml"
    text = gateways.gateway_toml(f"sqlite:///{tmp}/{mode}-{n}.db", upstream_url, 1)
    if mode != "off":
        text += f'\n[telemetry]\notlp_endpoint = "{sink_url}"\n'
    config.write_text(text)
    key = gateways.create_org(config)
    env = {name: value for name, value in procs.clean_env().items() if not name.startswith("OTEL_")}  # ours alone
    env.update(SAMPLED if mode == "on-10%" else {})
    command = [procs.GATEWAY, "serve", "--config", str(config)]
    with procs.running(command, config.with_suffix(".log"), "gateway_ready", env) as (process, url):
        yield gateways.Target(url, key, process.pid)


def one_round(mode: str, upstream_url: str, sink_url: str, tmp: Path, args: argparse.Namespace, n: int) -> dict:
    with gateway(mode, upstream_url, sink_url, tmp, n) as target:
        wrk.run(target.url, target.key, clients.CHAT_BODY, 8, WARMUP_S)
        return {"c1": split(target, 1, args.duration), "c32": split(target, 32, args.duration)}


def split(target: gateways.Target, connections: int, duration_s: int) -> dict:
    """A closed-loop run, its CPU per request also split between the event loop and the rest."""
    before = procs.main_thread_cpu_seconds(target.pid)
    result = clients.closed_loop(target, connections, duration_s)
    loop = 1e6 * (procs.main_thread_cpu_seconds(target.pid) - before) / max(result["requests"], 1)
    return {**result, "loop_us_per_request": round(loop, 1),
            "threads_us_per_request": round(result["cpu_us_per_request"] - loop, 1)}


def exported(sink_url: str) -> dict:
    with urllib.request.urlopen(f"{sink_url}/count", timeout=5) as answer:
        return orjson.loads(answer.read())


def summary(rounds: list[dict]) -> dict:
    """The median over rounds of each figure the table shows."""
    def median(load: str, key: str) -> float:
        return round(statistics.median(r[load].get(key, 0) for r in rounds), 1)
    return {f"{load}_{key}": median(load, key) for load in ("c1", "c32")
            for key in ("rps", "cpu_us_per_request", "loop_us_per_request", "threads_us_per_request", "p50_ms",
                        "p99_ms")}


HEADERS = ("traces", "req/s c=32", "CPU µs/req c=32", "event loop", "other threads", "CPU µs/req c=1",
           "p50 c=1 (ms)", "p99 c=32 (ms)")


def render(result: dict) -> str:
    """A Markdown table, a row per mode, and what each mode adds to a request's CPU over traces off."""
    lines = ["| " + " | ".join(HEADERS) + " |", "|---" * len(HEADERS) + "|"]
    for mode in MODES:
        s = result["summary"][mode]
        cells = (mode, f"{s['c32_rps']:,.0f}", f"{s['c32_cpu_us_per_request']:,.0f}",
                 f"{s['c32_loop_us_per_request']:,.0f}", f"{s['c32_threads_us_per_request']:,.0f}",
                 f"{s['c1_cpu_us_per_request']:,.0f}", f"{s['c1_p50_ms']}", f"{s['c32_p99_ms']}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + f"\n\n{costs(result['summary'])} (medians of {result['rounds']} rounds)"


def costs(summary: dict) -> str:
    """Each traced mode's CPU per request at c=32 over traces off: in all, in the event loop, elsewhere."""
    off = summary["off"]

    def added(mode: str, key: str) -> float:
        return summary[mode][f"c32_{key}"] - off[f"c32_{key}"]
    return "CPU per request at c=32 against traces off: " + "; ".join(
        f"{mode} {100 * added(mode, 'cpu_us_per_request') / max(off['c32_cpu_us_per_request'], 1):+.1f}% "
        f"({added(mode, 'loop_us_per_request'):+,.0f} µs in the event loop, "
        f"{added(mode, 'threads_us_per_request'):+,.0f} µs in other threads)" for mode in MODES[1:])


def main(args: argparse.Namespace) -> int:
    if shutil.which("wrk") is None:
        sys.exit("wrk is not installed: `apt-get install -y wrk` (make bench does it)")
    result: dict = {"machine": report.machine(), "duration_s": args.duration, "rounds": args.rounds,
                    "runs": {mode: [] for mode in MODES}}
    with tempfile.TemporaryDirectory(prefix="bench-tracing-") as name:
        tmp = Path(name)
        with gateways.fake_upstream(tmp, "upstream") as (_, upstream), otlp_sink(tmp) as sink_url:
            for n in range(args.rounds):
                for mode in MODES:
                    result["runs"][mode].append(one_round(mode, upstream.url, sink_url, tmp, args, n))
            result["exported"] = exported(sink_url)
    result["summary"] = {mode: summary(result["runs"][mode]) for mode in MODES}
    result["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    print(render(result))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_bytes(orjson.dumps(result, option=orjson.OPT_INDENT_2))
    print(f"\nwritten to {args.json}")
    return 0 if result["exported"]["exports"] > 0 else 1


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=int, default=8, help="seconds per run (whole: wrk takes no fractions)")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each mode, alternating")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help="where to write the results")
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(main(parse_args()))
