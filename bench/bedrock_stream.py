"""What a Bedrock stream costs through the gateway against an OpenAI one, side by side in one run:
one fake upstream (bench.fake_upstream) answering both OpenAI's SSE chat stream and Bedrock's
ConverseStream (AWS's binary event stream) with the same --chunks tokens at the same pacing, and
one `gateway serve` (SQLite, one process, as in production) with `[providers.openai]` and
`[providers.bedrock]` both pointed at it. The load is bench.streams, in its own process, asking
for openai/gpt-4o-mini or bedrock/global.anthropic.claude-sonnet-4-5-20250929-v1:0 (the same body
otherwise); the paths alternate, --rounds times each, and the table shows medians.

What bounds each number:
  TTFT c=1        the gateway's request path (auth, reserve, routing) and the upstream's first
                  write; the protocol only adds reading its first message (messageStart).
  streams/s c=32  the 2-core box shared by the upstream, the load generator and the gateway;
                  CPU per stream (utime+stime of the gateway's processes, from /proc) drifts far
                  less and is the figure to compare.
  read CPU        (bench.stream_reading, in-process, after the servers stop) per MiB and per
                  token of a long answer cut into 1-64 KiB reads. Bedrock's is bounded by
                  botocore's EventStreamBuffer (most of it), a cost per message: two CRC32s, the
                  prelude and headers unpacked in Python, and a copy of the rest of its buffer as
                  each message is taken off (`self._data = self._data[total_length:]`; and
                  `self._data += data` on every read). Those copies grow with the bytes buffered
                  at once (the read size), never with the stream's length, and are small next to
                  the per-message work up to 64 KiB reads (the most the adapter asks for). The
                  rest is each event's JSON and the OpenAI chunk encoded from it, where OpenAI's
                  path relays the chunk as it came. A ConverseStream message carries ~180 bytes per token
                  (prelude, three string headers, CRCs, Bedrock's random padding) against SSE's
                  ~200, so compare per token too.
  not measured    SigV4 signing (~50 µs a request with botocore): a bearer API key is configured,
                  so this path sends `Authorization: Bearer` and signs nothing.

    python -m bench.bedrock_stream [--duration 5] [--rounds 2] [--chunks 64] [--mib 2]
                                   [--json data/bench/bedrock_stream.json]
"""

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import orjson

from bench import clients, gateways, procs, report, stream_reading

DEFAULT_JSON = Path(__file__).resolve().parent.parent / "data" / "bench" / "bedrock_stream.json"
MAX_TOKENS = 1024  # Claude refuses a request without it; sent on both paths, so their bodies match
PATHS = {"openai": {"model": "openai/gpt-4o-mini", "max_tokens": MAX_TOKENS},
         "bedrock": {"model": "bedrock/global.anthropic.claude-sonnet-4-5-20250929-v1:0", "max_tokens": MAX_TOKENS}}
TITLES = {"openai": "OpenAI SSE through the gateway", "bedrock": "Bedrock ConverseStream through the gateway",
          "decoded": "Bedrock: `events.decoded` alone", "botocore": "Bedrock: botocore EventStreamBuffer alone"}
BEDROCK_KEY = "bench-bedrock-key"  # any string: the fake upstream never checks it
WARMUP_S = 1.0


def gateway_toml(ledger_url: str, upstream_url: str) -> str:
    """bench.gateways' production-like configuration, with a Bedrock provider on the same upstream."""
    return (gateways.gateway_toml(ledger_url, upstream_url, 1)
            + f'\n[providers.bedrock]\nprotocol = "bedrock"\nbase_url = "{upstream_url}"\napi_key = "{BEDROCK_KEY}"\n')


@contextlib.contextmanager
def gateway(upstream_url: str, tmp: Path) -> Iterator[gateways.Target]:
    """`gateway serve`, one process, on a fresh SQLite ledger with one funded org, for the block."""
    config = tmp / "gateway.toml"
    config.write_text(gateway_toml(f"sqlite:///{tmp}/gateway.db", upstream_url))
    key = gateways.create_org(config)
    command = [procs.GATEWAY, "serve", "--config", str(config)]
    with procs.running(command, config.with_suffix(".log"), "gateway_ready", procs.clean_env()) as (process, url):
        yield gateways.Target(url, key, process.pid)


def one_round(target: gateways.Target, path: str, duration_s: float) -> dict:
    return {"c1": clients.streamed(target, 1, duration_s, PATHS[path]),
            "c32": clients.streamed(target, 32, duration_s, PATHS[path])}


def summary(rounds: list[dict]) -> dict:
    """The median over rounds of each figure the table shows."""
    def median(load: str, key: str) -> float:
        return statistics.median(r[load].get(key, 0) for r in rounds)
    c32_ok = sum(r["c32"]["ok"] for r in rounds)
    return {"ttft_p50_ms": median("c1", "ttft_p50_ms"), "ttft_p99_ms": median("c1", "ttft_p99_ms"),
            "streams_per_s": median("c32", "rps"), "cpu_ms_per_stream": median("c32", "cpu_us_per_request") / 1000,
            "events_per_stream": round(sum(r["c32"]["events"] for r in rounds) / max(c32_ok, 1), 2)}


HEADERS = ("path", "TTFT p50 / p99 c=1 ms", "streams/s c=32", "gateway CPU ms/stream c=32", "events/stream",
           "bytes/token", "read CPU ms/MiB, 1 / 4 / 16 / 64 KiB reads", "read CPU µs/token, 16 KiB reads")


def row(name: str, result: dict) -> tuple[str, ...]:
    """One path's cells: the gateway's (dashes for the in-process-only readers), then reading's."""
    s, reading = result["summary"].get(name), result["reading"]["readers"][name]
    served = (report.DASH,) * 4 if s is None else (
        f"{s['ttft_p50_ms']:.2f} / {s['ttft_p99_ms']:.2f}", report.number(s["streams_per_s"]),
        report.number(s["cpu_ms_per_stream"], 2), report.number(s["events_per_stream"], 1))
    per_mib = " / ".join(report.number(reading["reads"][str(kib)]["cpu_ms_per_mib"], 1)
                         for kib in stream_reading.READ_KIB)
    return (TITLES[name], *served, report.number(reading["bytes_per_token"]), per_mib,
            report.number(reading["reads"]["16"]["cpu_us_per_token"], 2))


def render(result: dict) -> str:
    """A Markdown table, a row per path, and how its figures were taken."""
    lines = ["| " + " | ".join(HEADERS) + " |", "|---" * len(HEADERS) + "|"]
    lines += ["| " + " | ".join(row(name, result)) + " |" for name in stream_reading.READERS]
    reading = result["reading"]
    return "\n".join(lines) + (
        f"\n\n{result['chunks']} tokens a stream; medians of {result['rounds']} rounds of {result['duration_s']} s"
        f" per load, the paths alternating; reading: the least of {reading['repeats']} passes over one answer of"
        f" {reading['tokens']:,} tokens (time.process_time); {result['machine']['cpus']} CPUs")


def failures(result: dict) -> list[str]:
    """The runs that answered nothing or answered anything but 200s."""
    return [f"{path} {load}" for path, rounds in result["runs"].items() for r in rounds for load, run in r.items()
            if run["ok"] == 0 or run["non_2xx"] or run["errors"]]


def main(args: argparse.Namespace) -> int:
    result: dict = {"machine": report.machine(), "duration_s": args.duration, "rounds": args.rounds,
                    "chunks": args.chunks, "paths": PATHS, "runs": {path: [] for path in PATHS}}
    with tempfile.TemporaryDirectory(prefix="bench-bedrock-") as name:
        tmp = Path(name)
        with (gateways.fake_upstream(tmp, "upstream", "--chunks", str(args.chunks)) as (_, upstream),
              gateway(upstream.url, tmp) as target):
            for path in PATHS:
                clients.streamed(target, 8, WARMUP_S, PATHS[path])
            for _ in range(args.rounds):
                for path in PATHS:
                    result["runs"][path].append(one_round(target, path, args.duration))
    result["summary"] = {path: summary(result["runs"][path]) for path in PATHS}
    result["reading"] = stream_reading.measure(args.mib, args.repeats)
    result["failures"] = failures(result)
    result["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    print(render(result))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_bytes(orjson.dumps(result, option=orjson.OPT_INDENT_2))
    print(f"\nwritten to {args.json}" + (f"; FAILED: {', '.join(result['failures'])}" if result["failures"] else ""))
    return 1 if result["failures"] else 0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per load and path")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each path, alternating")
    parser.add_argument("--chunks", type=int, default=64, help="tokens in each streamed answer")
    parser.add_argument("--mib", type=float, default=2.0, help="size of the answer read in-process")
    parser.add_argument("--repeats", type=int, default=3, help="passes of each in-process reading (the least kept)")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help="where to write the results")
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(main(parse_args()))
