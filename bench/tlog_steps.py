"""bench.tlog's measured steps, each run in a process of its own (`python -m bench.tlog_steps STEP
ARG...`, its JSON result the last line of its stdout), so its peak RSS is its own: the tree grown
over a ledger, the in-memory Builder over synthetic leaves, proofs as library calls and over HTTP,
and the sizes of tree heads (recorded) beside the per-stream checkpoints they replaced (computed).

Every proof measured is also checked (ledger.merkle.check_*), outside the time measured.
"""

import asyncio
import base64
import contextlib
import hashlib
import json
import os
import random
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from types import SimpleNamespace
from typing import TypeVar, cast

import aiohttp

from bench import procs
from gateway.jsonio import encode
from gateway.services import Services
from gateway.ledger_api import published
from ledger import checkpoints, merkle, notes, proofs, queries, tree
from ledger.backends import recorder_for
from ledger.checkpoints import Checkpoint
from ledger.events import LedgerVerified, StreamHead, encode_event
from ledger.recorder import Recorder
from ledger.signing import Signer

T = TypeVar("T")
HEADS = published.LIMIT.default  # tree heads recorded per ledger: what GET /v1/ledger/checkpoints lists
HEADS_OF_STREAMS = ("SELECT e.stream_id, e.version, e.hash FROM events e JOIN (SELECT stream_id, MAX(version) AS v"
                    " FROM events WHERE position <= ? GROUP BY stream_id) m"
                    " ON e.stream_id = m.stream_id AND e.version = m.v")


@contextlib.asynccontextmanager
async def opened(url: str) -> AsyncIterator[Recorder]:
    recorder = recorder_for(url)
    await recorder.open(migrate=False)
    try:
        yield recorder
    finally:
        await recorder.close()


def percentiles(seconds: list[float]) -> dict:
    ordered = sorted(seconds)
    return {"count": len(ordered), "p50_ms": round(1000 * ordered[len(ordered) // 2], 3),
            "p99_ms": round(1000 * ordered[min(len(ordered) - 1, len(ordered) * 99 // 100)], 3)}


def peak_mb() -> float:
    """This process's peak resident memory so far (VmHWM), in MB."""
    return round(procs.peak_rss_kib(os.getpid()) / 1024, 1)


async def timed(call: Awaitable[T]) -> tuple[T, float]:
    began = time.perf_counter()
    result = await call
    return result, time.perf_counter() - began


# Tree building


async def grow(url: str) -> dict:
    """The tree grown over every event of a ledger whose tree bench.tlog emptied; its root checked
    against a Builder fed the same events (after the time measured)."""
    async with opened(url) as recorder:
        if await tree.size(recorder):
            raise SystemExit("the tree is not empty: bench.tlog empties it first")
        last, before = await queries.last_position(recorder), peak_mb()
        size, seconds = await timed(tree.grow(recorder, last))
        peak = peak_mb()
        root = await tree.root(recorder, size)
        rebuilt = await rebuilt_root(recorder, size)
    return {"events": size, "last_position": last, "seconds": round(seconds, 2), "events_per_s": round(size / seconds),
            "rss_before_mb": before, "peak_rss_growing_mb": peak, "root": root.hex(),
            "root_matches_rebuild": root == rebuilt}


async def rebuilt_root(recorder: Recorder, size: int) -> bytes:
    built = tree.Builder()
    async for hashes in tree.hashes_after(recorder, 0, size):
        for digest in hashes:
            built.add(merkle.leaf_hash(digest))
    return built.root()


def synthetic(start: int, count: int) -> list[bytes]:
    """Stand-ins for chain hashes: SHA-256 of each leaf's number (8 bytes, big-endian)."""
    return [hashlib.sha256(n.to_bytes(8, "big")).digest() for n in range(start, start + count)]


def build(leaves: int) -> dict:
    """tree.Builder over `leaves` synthetic leaves as `grow` drives it: each leaf hashed and added,
    the changed tiles taken every WRITE_EVERY (and dropped: no database). Only that is timed."""
    built, seconds, before = tree.Builder(), 0.0, peak_mb()
    for start in range(0, leaves, tree.WRITE_EVERY):
        batch = synthetic(start, min(tree.WRITE_EVERY, leaves - start))
        began = time.perf_counter()
        for leaf in map(merkle.leaf_hash, batch):
            built.add(leaf)
        built.taken()
        seconds += time.perf_counter() - began
    return {"events": leaves, "seconds": round(seconds, 2), "events_per_s": round(leaves / seconds),
            "rss_before_mb": before, "peak_rss_growing_mb": peak_mb(), "root": built.root().hex()}


# Proofs


async def library_proofs(url: str, count: int) -> dict:
    """`count` inclusion proofs of random leaves and consistency proofs from random sizes, in the
    whole stored tree, as library calls (tree.inclusion, tree.consistency); each checked."""
    rng = random.Random(40)
    async with opened(url) as recorder:
        size = await tree.size(recorder)
        root = await tree.root(recorder, size)
        inclusion = [await _inclusion(recorder, rng.randrange(size), size, root) for _ in range(count)]
        consistency = [await _consistency(recorder, rng.randrange(1, size), size, root) for _ in range(count)]
    return {"tree_size": size, "inclusion": percentiles(inclusion), "consistency": percentiles(consistency)}


async def _inclusion(recorder: Recorder, index: int, size: int, root: bytes) -> float:
    path, seconds = await timed(tree.inclusion(recorder, index, size))
    found = await proofs.event_at(recorder, index + 1)
    assert found is not None
    merkle.check_inclusion(index, size, merkle.leaf_hash(found[1]), path, root)
    return seconds


async def _consistency(recorder: Recorder, old: int, new: int, root: bytes) -> float:
    proof, seconds = await timed(tree.consistency(recorder, old, new))
    merkle.check_consistency(old, new, await tree.root(recorder, old), root, proof)
    return seconds


async def http_proofs(ledger_url: str, gateway_url: str, key: str, org_id: str, count: int) -> dict:
    """`count` of each proof over HTTP, one at a time, against the newest published tree head:
    the inclusion of random events of `org_id` (its admin `key`), consistency from random sizes."""
    rng = random.Random(41)
    async with opened(ledger_url) as recorder, aiohttp.ClientSession(gateway_url) as session:
        listing, listing_bytes = await _get(session, "/v1/ledger/checkpoints")
        head = listing["checkpoints"][0]
        size, root = head["tree_size"], base64.b64decode(head["root_hash"])
        ours = [row[0] for row in await recorder._fetch("SELECT position FROM events WHERE stream_id = ?"
                                                        " AND position <= ?", [org_id, size])]
        inclusion = [await _included(session, key, rng.choice(ours), size, root) for _ in range(count)]
        consistency = [await _extended(session, recorder, rng.randrange(1, size), size, root) for _ in range(count)]
    return {"tree_size": size, "listing_bytes": listing_bytes, "inclusion": percentiles(inclusion),
            "consistency": percentiles(consistency)}


async def _included(session: aiohttp.ClientSession, key: str, position: int, size: int, root: bytes) -> float:
    (answer, _), seconds = await timed(_get(session, f"/v1/ledger/proofs/inclusion?position={position}&size={size}",
                                            key))
    merkle.check_inclusion(answer["leaf_index"], size, base64.b64decode(answer["leaf_hash"]),
                           _b64s(answer["audit_path"]), root)
    return seconds


async def _extended(session: aiohttp.ClientSession, recorder: Recorder, old: int, size: int, root: bytes) -> float:
    (answer, _), seconds = await timed(_get(session, f"/v1/ledger/proofs/consistency?from={old}&to={size}"))
    merkle.check_consistency(old, size, await tree.root(recorder, old), root, _b64s(answer["proof"]))
    return seconds


async def _get(session: aiohttp.ClientSession, path: str, key: str | None = None) -> tuple[dict, int]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with session.get(path, headers=headers) as response:
        body = await response.read()
        if response.status != 200:
            raise SystemExit(f"GET {path}: {response.status} {body[:300]!r}")
        return json.loads(body), len(body)


def _b64s(values: list[str]) -> list[bytes]:
    return [base64.b64decode(value) for value in values]


# Checkpoint sizes


async def sizes(url: str, key_path: str) -> dict:
    """Record HEADS tree heads (signed) at the log's end, then the bytes of the newest (its event,
    its published JSON), of the listing GET /v1/ledger/checkpoints answers, and of the same as the
    old per-stream checkpoints would have been at that size (computed from every stream's head)."""
    signer = Signer.configured(key_path)
    assert signer is not None
    async with opened(url) as recorder:
        for _ in range(HEADS):
            await checkpoints.record_tree(recorder, await queries.last_position(recorder), full=False, signer=signer)
        latest = await checkpoints.latest(recorder)
        assert latest is not None
        [(data,)] = await recorder._fetch("SELECT data FROM events WHERE position = ?", [latest.position])
        services = cast(Services, SimpleNamespace(recorder=recorder, signer=signer))  # what listing reads
        listing = await published.listing(services, None, HEADS)
        heads = await stream_heads(recorder, latest.verified.upto)
    return {"events": latest.verified.upto, "streams": len(heads), "head_event_bytes": len(bytes(data)),
            "published_bytes": len(encode(latest.published())), "listing_bytes": len(encode(listing)),
            "listed": len(listing["checkpoints"]), **old_sizes(latest, heads, signer, listing)}


async def stream_heads(recorder: Recorder, upto: int) -> tuple[StreamHead, ...]:
    rows = await recorder._fetch(HEADS_OF_STREAMS, [upto])
    return tuple(StreamHead(stream, version, bytes(digest).hex()) for stream, version, digest in sorted(rows))


def old_sizes(latest: Checkpoint, heads: tuple[StreamHead, ...], signer: Signer, listing: dict) -> dict:
    """The old checkpoint (every stream's head, signed) at the same position: its event, its
    published JSON (Checkpoint.published_legacy) and a listing of HEADS of them."""
    event = checkpoints.signed(LedgerVerified(upto=latest.verified.upto, heads=heads), signer)
    old = Checkpoint(latest.position, latest.recorded_at_us, event).published_legacy()
    return {"old_event_bytes": len(encode_event(event)), "old_published_bytes": len(encode(old)),
            "old_listing_bytes": len(encode({**listing, "checkpoints": [old] * HEADS}))}


def computed_head(size: int, root_hex: str, key_path: str) -> dict:
    """The bytes of a tree head of `size` leaves and this root had one been recorded (no ledger
    that large here): the note and event built as ledger.checkpoints.record_tree builds them."""
    signer = Signer.configured(key_path)
    assert signer is not None
    root, origin = bytes.fromhex(root_hex), checkpoints.ORIGIN
    body = notes.text(origin, size, root, (f"time {checkpoints._time(time.time_ns() // 1000)}",))
    signature = base64.b64decode(signer.sign(body.encode()))
    event = LedgerVerified(upto=size, heads=(), tree_size=size, root=base64.b64encode(root).decode(),
                           key_id=signer.key_id, public_key=signer.public_b64,
                           signature=base64.b64encode(signature).decode(),
                           note=notes.signed(body, origin, signer.public_raw, signature))
    return {"events": size, "head_event_bytes": len(encode_event(event)),
            "published_bytes": len(encode(Checkpoint(size + 1, time.time_ns() // 1000, event).published()))}


STEPS: dict[str, Callable[..., dict]] = {
    "grow": lambda url: asyncio.run(grow(url)),
    "build": lambda leaves: build(int(leaves)),
    "library": lambda url, count: asyncio.run(library_proofs(url, int(count))),
    "http": lambda url, gateway, key, org, count: asyncio.run(http_proofs(url, gateway, key, org, int(count))),
    "sizes": lambda url, key_path: asyncio.run(sizes(url, key_path)),
    "computed": lambda size, root, key_path: computed_head(int(size), root, key_path),
}

if __name__ == "__main__":
    print(json.dumps(STEPS[sys.argv[1]](*sys.argv[2:])))
