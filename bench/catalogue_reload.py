"""What putting a large catalogue in force costs, measured in a process of its own (so its RSS is
the catalogue's and nothing else's): bench.catalogue_scale runs it and reads its JSON line.

Of one catalogue file (bench.catalogue_synth, dated): its size; `Catalogue.parse` (decode,
validate, price, index); `publish` into a fresh SQLite ledger (parse again, one priced catalogue
per switch its dates make, the event appended); a follower's `LiveCatalogue.load` (reads the
prices stream, builds the catalogue of every switch in force now or later); memory: the RSS this
process grew by building one Catalogue (measured first, from a fresh process), and tracemalloc's
peak and retained bytes while building another; and GET /v1/prices/{version}
(`LiveCatalogue.document`, then the response's JSON encoding) for the version in force (its prices
built already), again (kept), and for a version no longer in force after a reload (read back
from the ledger and parsed again: the cold path).

    python -m bench.catalogue_reload --file CATALOGUE.json --tmp DIR [--repeats 3]
"""

import argparse
import asyncio
import gc
import os
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path

import orjson

from bench import catalogue_synth, procs
from gateway.catalogue import Catalogue
from gateway.catalogue.live import LiveCatalogue
from gateway.catalogue.publishing import publish
from gateway.jsonio import encode
from ledger.backends import recorder_for
from ledger.recorder import Recorder

PROVIDERS = frozenset(catalogue_synth.PROVIDERS)
FIRST_DELAY_S = 2.0  # [catalogue] switch_delay_s's default (a first publication is in force at once anyway)


def memory(content: bytes) -> dict:
    """RSS growth from building one Catalogue (first, while the process is fresh), then
    tracemalloc's peak and what stays allocated while another is held."""
    gc.collect()
    before = procs.rss_kib(os.getpid())
    held = Catalogue.parse(content, "rss")
    gc.collect()
    grown = procs.rss_kib(os.getpid()) - before
    tracemalloc.start()
    traced = Catalogue.parse(content, "traced")
    gc.collect()
    retained, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del held, traced
    return {"rss_growth_kib": grown, "traced_peak_bytes": peak, "traced_retained_bytes": retained}


def best_ms(repeats: int, run: Callable[[], object]) -> float:
    """The least wall time of `repeats` calls, in ms (the least is the one least disturbed)."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return round(1000 * min(times), 2)


async def timed_ms(pending: Awaitable[object]) -> float:
    """How long awaiting `pending` takes, in ms (a coroutine starts running only when awaited)."""
    started = time.perf_counter()
    await pending
    return round(1000 * (time.perf_counter() - started), 2)


async def opened(tmp: Path, name: str) -> Recorder:
    recorder = recorder_for(f"sqlite:///{tmp}/{name}.db")
    await recorder.open()
    return recorder


async def publishing(content: bytes, tmp: Path, repeats: int) -> dict:
    """`publish` into a fresh ledger each time (the least kept), and how many switches it made."""
    times, switches = [], 0
    for n in range(repeats):
        recorder = await opened(tmp, f"publish-{n}")
        try:
            started = time.perf_counter()
            published = await publish(recorder, content, "bench", PROVIDERS, delay_s=FIRST_DELAY_S)
            times.append(time.perf_counter() - started)
            switches = len(published.switches)
        finally:
            await recorder.close()
    return {"publish_ms": round(1000 * min(times), 2), "switches": switches}


async def following(initial: Catalogue, recorder: Recorder, repeats: int) -> float:
    """A follower's `load` of everything published (the least of `repeats`, each a new one)."""
    times = []
    for _ in range(repeats):
        live = LiveCatalogue(initial, PROVIDERS)
        times.append(await timed_ms(live.load(recorder)))
    return min(times)


async def document(live: LiveCatalogue, recorder: Recorder, version: str) -> dict:
    """One GET /v1/prices/{version}: the document, then its encoding, as the route answers."""
    started = time.perf_counter()
    found = await live.document(recorder, version)
    looked_up = time.perf_counter()
    body = encode(found)
    done = time.perf_counter()
    return {"ms": round(1000 * (done - started), 2), "document_ms": round(1000 * (looked_up - started), 2),
            "bytes": len(body)}


async def prices_route(content: bytes, initial: Catalogue, tmp: Path, repeats: int) -> dict:
    """Publish the file, then a revision of it at once (a reload): the first version is past, so a
    new follower has built only the revision's; then time the route on both, and `load` too."""
    recorder = await opened(tmp, "follower")
    try:
        first = await publish(recorder, content, "bench", PROVIDERS, delay_s=FIRST_DELAY_S)
        revised = catalogue_synth.revised(content)
        await publish(recorder, revised, "bench (revised)", PROVIDERS, delay_s=0)
        load_ms = await following(initial, recorder, repeats)
        live = LiveCatalogue(initial, PROVIDERS)
        await live.load(recorder)
        current = live.now().version
        return {"load_ms": load_ms, "spans_built": len(live.timeline.upcoming(time.time_ns() // 1000)),
                "in_force_first": await document(live, recorder, current),
                "in_force_again": await document(live, recorder, current),
                "past_version": await document(live, recorder, first.switches[0].version)}
    finally:
        await recorder.close()


async def measure(path: Path, tmp: Path, repeats: int) -> dict:
    content = path.read_bytes()
    result = {"bytes": len(content), **memory(content)}
    initial = Catalogue.parse(content, "initial")
    result["models"] = len(initial.listing(include_deactivated=True))
    result["parse_ms"] = best_ms(repeats, lambda: Catalogue.parse(content, "bench"))
    result.update(await publishing(content, tmp, repeats))
    result.update(await prices_route(content, initial, tmp, repeats))
    result["rss_end_kib"] = procs.rss_kib(os.getpid())
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", type=Path, required=True, help="the catalogue file to measure")
    parser.add_argument("--tmp", type=Path, required=True, help="a directory for the SQLite ledgers")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each timing (the least kept)")
    args = parser.parse_args(argv)
    print(orjson.dumps(asyncio.run(measure(args.file, args.tmp, args.repeats))).decode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
