"""Hash chains: each event must follow its stream's previous one (version, and a hash over the
previous hash), and the log's positions must run gapless. Only each stream's head is held.

A stream's chain lies wholly in its share of the streams (ledger.partitions), so shares are
checked apart, in separate processes, as they are replayed; the positions of all shares together
are checked at once in the database (`gapless`), and walked one by one only to say where a gap is.
A verification from a checkpoint starts from the heads it names, after checking that the log
still holds those very events (`heads_changed`).
"""

from collections.abc import AsyncIterator

from ledger.recorder import GENESIS_HASH, CorruptEvent, Recorded, Recorder, chain_hash

Head = tuple[int, bytes]  # a stream's version and that event's hash
BATCH = 5000  # events read at once
PAIR = "(CAST(? AS TEXT), CAST(? AS BIGINT))"  # typed, for PostgreSQL
# Stored event rows by (stream, version), at or before a position: ? pairs, then the position.
EVENTS_AT = ("WITH p(stream_id, version) AS (VALUES {pairs}) SELECT e.position, e.stream_id, e.version, e.type,"
             " e.recorded_at_us, e.data, e.hash FROM p JOIN events e ON e.stream_id = p.stream_id"
             " AND e.version = p.version WHERE e.position <= ?")
LOOKUPS = 400  # events looked up in one query (two parameters each)
POSITIONS = "SELECT count(*), COALESCE(MIN(position), 0), COALESCE(MAX(position), 0) FROM events WHERE position <= ?"


async def check_range(recorder: Recorder, first: int, last: int, start: dict[str, Head] | None = None,
                      size: int = BATCH) -> tuple[int, list[str], dict[str, Head]]:
    """(events checked, problems, each stream's head at the end) of positions `first`..`last`,
    every stream starting from its head in `start` (a checkpoint's), or from nothing, `size`
    events at a time. An undecodable event is the one problem then."""
    heads = dict(start or {})
    checked, at, problems = 0, first - 1, list[str]()
    try:
        async for batch in ranged(recorder, first, last, size):
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
    problems: list[str] = []
    for r in batch:
        if r.position != last + 1:
            problems.append(f"position {r.position} follows {last}: the log has a gap")
        last = r.position
        _follow(r, heads, problems)
    return last, problems


def check_links(batch: list[Recorded], heads: dict[str, Head]) -> list[str]:
    """Check each event of a batch (its streams' events, in position order) follows its stream's head."""
    problems: list[str] = []
    for r in batch:
        _follow(r, heads, problems)
    return problems


def _follow(r: Recorded, heads: dict[str, Head], problems: list[str]) -> None:
    version, prev = heads.get(r.stream_id, (0, GENESIS_HASH))
    if r.version != version + 1:
        problems.append(f"stream {r.stream_id}: version {r.version} follows {version}")
    if r.kind != r.event.__struct_config__.tag:
        problems.append(f"position {r.position}: stored type {r.kind!r} does not match its data")
    if chain_hash(prev, r.position, r.stream_id, r.version, r.kind, r.recorded_at_us, r.data) != r.hash:
        problems.append(f"position {r.position} (stream {r.stream_id} v{r.version}): hash mismatch")
    heads[r.stream_id] = (r.version, r.hash)


async def gapless(recorder: Recorder, upto: int) -> bool:
    """Whether positions 1..`upto` are all there: positions are unique, so their count says so."""
    [(count, first, last)] = await recorder._fetch(POSITIONS, [upto])
    return count == last == upto and first == min(1, upto)


async def stored_events(recorder: Recorder, wanted: list[tuple[str, int]], upto: int) -> dict[tuple[str, int], tuple]:
    """The stored rows (position, stream, version, type, time, data, hash) of these (stream,
    version) events, those at or before position `upto`."""
    stored: dict[tuple[str, int], tuple] = {}
    for start in range(0, len(wanted), LOOKUPS):
        chunk = wanted[start:start + LOOKUPS]
        sql = EVENTS_AT.format(pairs=", ".join([PAIR] * len(chunk)))
        rows = await recorder._fetch(sql, [value for pair in chunk for value in pair] + [upto])
        stored.update({(row[1], row[2]): row for row in rows})
    return stored


async def heads_changed(recorder: Recorder, heads: dict[str, Head], upto: int) -> list[str]:
    """Where the stored log no longer holds the heads a checkpoint at `upto` named, each head
    rehashed from its stored event and the hash before it: a rewritten head would otherwise pass,
    since the events after it link to the checkpoint's hash."""
    wanted = [(s, v - step) for s, (v, _) in heads.items() for step in (0, 1) if v - step > 0]
    stored = await stored_events(recorder, wanted, upto)
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
