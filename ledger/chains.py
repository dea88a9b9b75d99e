"""Hash chains checked over a range of positions, holding each stream's head and nothing else.

A range [first, last] is checked on its own: its positions must run gapless from `first`, and each
event must follow its stream's previous event (version, and hash over the previous hash). The event
before a stream's first in the range lies before the range: it is looked up in the log (or taken
from `heads` given, a checkpoint's), and the range holding it checks its hash. So ranges can be
checked in any order, in separate processes, and together check what one pass over the log would.
"""

from collections.abc import AsyncIterator

from ledger.recorder import GENESIS_HASH, CorruptEvent, Recorded, Recorder, chain_hash

Head = tuple[int, bytes]  # a stream's version and that event's hash
BATCH = 5000  # events read at once
# The event before each (stream, version) named, if it lies before the range: ? pairs, then `first`.
PREDECESSORS = ("WITH p(stream_id, version) AS (VALUES {pairs}) SELECT e.stream_id, e.version, e.hash"
                " FROM p JOIN events e ON e.stream_id = p.stream_id AND e.version = p.version WHERE e.position < ?")
PAIR = "(CAST(? AS TEXT), CAST(? AS BIGINT))"  # typed, for PostgreSQL
# Stored event rows by (stream, version), at or before a position: ? pairs, then the position.
EVENTS_AT = ("WITH p(stream_id, version) AS (VALUES {pairs}) SELECT e.position, e.stream_id, e.version, e.type,"
             " e.recorded_at_us, e.data, e.hash FROM p JOIN events e ON e.stream_id = p.stream_id"
             " AND e.version = p.version WHERE e.position <= ?")
LOOKUPS = 400  # streams looked up in one query (two parameters each)


async def check_range(recorder: Recorder, first: int, last: int, start: dict[str, Head] | None = None
                      ) -> tuple[int, list[str], dict[str, Head]]:
    """(events checked, problems, each stream's head at the end) of positions `first`..`last`.
    `start` holds every stream's head before `first` (a checkpoint's: a stream it does not name
    begins at `first`); without it they are looked up in the log. An undecodable event is the one
    problem then."""
    heads = {} if start is None else dict(start)
    checked, at, problems = 0, first - 1, []
    try:
        async for batch in ranged(recorder, first, last):
            if first > 1 and start is None:
                await _look_up(recorder, batch, heads, first)
            at, found = check_chain(batch, heads, at)
            checked, problems = checked + len(batch), problems + found
    except CorruptEvent as exc:
        return 0, [str(exc)], heads
    return checked, problems, heads


async def ranged(recorder: Recorder, first: int, last: int, size: int = BATCH) -> AsyncIterator[list[Recorded]]:
    """The events of positions `first`..`last`, in position order, in batches."""
    after = first - 1
    while after < last and (batch := await recorder.read(after, min(size, last - after))):
        if batch[-1].position > last:  # a gap below made the read run past the range
            batch = [r for r in batch if r.position <= last]
            if not batch:
                return
        after = batch[-1].position
        yield batch


def check_chain(batch: list[Recorded], heads: dict[str, Head], last: int) -> tuple[int, list[str]]:
    """Check a batch continues the global order and each stream's chain; returns new last position."""
    problems = []
    for r in batch:
        if r.position != last + 1:
            problems.append(f"position {r.position} follows {last}: the log has a gap")
        last = r.position
        version, prev = heads.get(r.stream_id, (0, GENESIS_HASH))
        if r.version != version + 1:
            problems.append(f"stream {r.stream_id}: version {r.version} follows {version}")
        if r.kind != r.event.__struct_config__.tag:
            problems.append(f"position {r.position}: stored type {r.kind!r} does not match its data")
        expected = chain_hash(prev, r.position, r.stream_id, r.version, r.kind, r.recorded_at_us, r.data)
        if expected != r.hash:
            problems.append(f"position {r.position} (stream {r.stream_id} v{r.version}): hash mismatch")
        heads[r.stream_id] = (r.version, r.hash)
    return last, problems


async def heads_changed(recorder: Recorder, heads: dict[str, Head], upto: int) -> list[str]:
    """Where the stored log no longer holds the heads a checkpoint at `upto` named, each head
    rehashed from its stored event and the hash before it: a rewritten head would otherwise pass,
    since the events after it link to the checkpoint's hash."""
    wanted = [(s, v - step) for s, (v, _) in heads.items() for step in (0, 1) if v - step > 0]
    stored: dict[tuple[str, int], tuple] = {}
    for start in range(0, len(wanted), LOOKUPS):
        chunk = wanted[start:start + LOOKUPS]
        sql = EVENTS_AT.format(pairs=", ".join([PAIR] * len(chunk)))
        rows = await recorder._fetch(sql, [value for pair in chunk for value in pair] + [upto])
        stored.update({(row[1], row[2]): row for row in rows})
    return [f"stream {stream} v{version}: no longer the event the checkpoint at {upto} verified"
            for stream, (version, digest) in sorted(heads.items())
            if not _holds(stored.get((stream, version)), stored.get((stream, version - 1)), digest)]


def _holds(row: tuple | None, before: tuple | None, digest: bytes) -> bool:
    """Whether a stored event row still hashes, from the hash before it, to `digest`."""
    if row is None:
        return False
    position, stream_id, version, kind, recorded_at_us, data, stored = row
    prev = bytes(before[-1]) if before is not None else GENESIS_HASH
    return bytes(stored) == digest == chain_hash(prev, position, stream_id, version, kind, recorded_at_us, bytes(data))


async def _look_up(recorder: Recorder, batch: list[Recorded], heads: dict[str, Head], first: int) -> None:
    """Heads of the streams the batch begins, from the events before the range (none: genesis)."""
    wanted: dict[str, int] = {}
    for r in batch:
        if r.stream_id not in heads and r.stream_id not in wanted and r.version > 1:
            wanted[r.stream_id] = r.version - 1
    pairs = list(wanted.items())
    for start in range(0, len(pairs), LOOKUPS):
        chunk = pairs[start:start + LOOKUPS]
        sql = PREDECESSORS.format(pairs=", ".join([PAIR] * len(chunk)))
        rows = await recorder._fetch(sql, [value for pair in chunk for value in pair] + [first])
        heads.update({stream: (version, bytes(digest)) for stream, version, digest in rows})
