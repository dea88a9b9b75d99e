"""Replay and verification: the log alone must explain every projection row.

`verify` checks the global positions are gapless, every stream's versions are gapless, every
hash links to its predecessor, and that a replay of all events into a scratch store yields
exactly the stored projection tables. `replay` rebuilds the stored projections in place.
Verification holds a batch of events, each stream's head and a page of each projection at a time,
so its memory does not grow with the ledger.
"""

from collections.abc import AsyncIterator, Callable

from ledger import projections, queries
from ledger.recorder import GENESIS_HASH, CorruptEvent, Recorded, Recorder, chain_hash

Progress = Callable[[int, int], None]
PAGE_ROWS = 5000  # rows of each copy of a projection compared at once: what verify's memory holds


async def batches(recorder: Recorder, *, upto: int | None = None, size: int = 2000,
                  progress: Progress | None = None) -> AsyncIterator[list[Recorded]]:
    """Every event in position order, in batches, stopping at `upto` if given."""
    after, total = 0, upto or 0
    while batch := await recorder.read(after, size):
        if upto is not None:
            batch = [r for r in batch if r.position <= upto]
            if not batch:
                return
        after = batch[-1].position
        yield batch
        if progress:
            progress(after, total)


def check_chain(batch: list[Recorded], heads: dict[str, tuple[int, bytes]], last: int) -> tuple[int, list[str]]:
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


async def verify(recorder: Recorder) -> tuple[int, list[str]]:
    """Return (events checked, problems); no problems means the ledger verifies."""
    async with recorder.snapshot():
        try:
            checked, problems = await _verify_chains(recorder)
        except CorruptEvent as exc:
            return 0, [str(exc)]
        if problems:
            return checked, problems
        problems = await _verify_projections(recorder)
    return checked, problems


async def _verify_chains(recorder: Recorder) -> tuple[int, list[str]]:
    heads: dict[str, tuple[int, bytes]] = {}
    last, checked, problems = 0, 0, []
    async for batch in batches(recorder):
        last, found = check_chain(batch, heads, last)
        checked += len(batch)
        problems += found
    return checked, problems


async def _verify_projections(recorder: Recorder) -> list[str]:
    scratch = recorder.scratch()
    await scratch.open()
    try:
        await scratch.rebuild(batches(recorder), reset=False)
        return [difference for table in projections.TABLES
                if (difference := await first_difference(table, recorder, scratch))]
    finally:
        await scratch.close()


async def first_difference(table: str, stored: Recorder, replayed: Recorder, page: int = PAGE_ROWS) -> str | None:
    """The first row where two copies of a projection table differ, or None if identical. Both are
    read page by page in key order, so memory holds two pages whatever the table's size."""
    after: tuple | None = None
    width, seen = projections.key_width(table), 0
    while True:
        sql, params = projections.select_page(table, after, page)
        ours, theirs = await stored._fetch(sql, params), await replayed._fetch(sql, params)
        for index, (a, b) in enumerate(zip(ours, theirs, strict=False)):  # the lengths are compared next
            if tuple(a) != tuple(b):
                row_a, row_b = tuple(a[width:]), tuple(b[width:])
                return f"{table}: row {seen + index} differs: stored {row_a!r} != replayed {row_b!r}"
        if len(ours) != len(theirs):
            return await _counts_differ(table, stored, replayed)
        if len(ours) < page:
            return None
        after, seen = tuple(ours[-1][:width]), seen + page


async def _counts_differ(table: str, stored: Recorder, replayed: Recorder) -> str:
    [(ours,)], [(theirs,)] = await stored._fetch(projections.count_rows(table)), await replayed._fetch(
        projections.count_rows(table))
    return f"{table}: {ours} stored rows != {theirs} replayed rows"


async def replay(recorder: Recorder, progress: Progress | None = None) -> int:
    """Rebuild every projection table from events alone; returns the events replayed."""
    last = 0

    async def to_the_end() -> AsyncIterator[list[Recorded]]:
        # Find the end only once `rebuild` consumes this, under its write lock: an append
        # committed before then would otherwise have its projection emptied and not replayed.
        nonlocal last
        last = await queries.last_position(recorder)
        async for batch in batches(recorder, upto=last, progress=progress):
            yield batch

    await recorder.rebuild(to_the_end(), reset=True)
    return last
