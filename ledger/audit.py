"""Replay and verification: the log alone must explain every projection row.

`verify` checks the global positions are gapless, every stream's versions are gapless, every
hash links to its predecessor (ledger.chains), and that a replay of all events into scratch
stores yields exactly the stored projection tables. `replay` rebuilds projections beside the live
ones and swaps them in. Both hold a batch of events, each stream's head and a page of each
projection at a time, so their memory does not grow with the ledger; with `workers` above one,
they split the work over that many processes (ledger.partitions, ledger.parallel).
"""

import os
from collections.abc import AsyncIterator, Callable, Sequence
from typing import NamedTuple

from ledger import chains, checkpoints, projections, queries
from ledger.chains import Head
from ledger.parallel import Crew
from ledger.partitions import StreamRange, position_ranges, stream_ranges
from ledger.recorder import Recorded, Recorder

Progress = Callable[[int, int], None]
PAGE_ROWS = 5000  # rows of each copy of a projection compared at once: what verify's memory holds
BATCH = 5000  # events a rebuild folds at once
EVERY_STREAM: StreamRange = ("", None)
PARALLEL_FROM = 200_000  # events from which `workers=0` splits the work: below, starting processes costs more
MAX_AUTO_WORKERS = 8


async def batches(recorder: Recorder, *, upto: int | None = None, size: int = BATCH,
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


async def share_of(recorder: Recorder, streams: StreamRange, upto: int, size: int = BATCH,
                   progress: Progress | None = None) -> AsyncIterator[list[Recorded]]:
    """The events of a range of streams up to position `upto`, in position order, in batches."""
    if streams == EVERY_STREAM:
        async for batch in batches(recorder, upto=upto, size=size, progress=progress):
            yield batch
        return
    after = 0
    while batch := await recorder.read_streams(after, size, *streams):
        batch = [r for r in batch if r.position <= upto]
        if not batch:
            return
        after = batch[-1].position
        yield batch


async def rebuild_share(live: Recorder, scratch: Recorder, streams: StreamRange, upto: int) -> None:
    """Project a share of the streams' events, up to `upto`, into an empty scratch store."""
    await scratch.rebuild(share_of(live, streams, upto), reset=False)


class Verification(NamedTuple):
    checked: int  # events read
    problems: list[str]  # none: the ledger verifies
    upto: int  # the last position verified
    heads: dict[str, Head]  # every stream's head at `upto` (when its chains verify)
    full: bool  # from the first event, projections included; else from the last checkpoint on


async def verify(recorder: Recorder, *, workers: int = 1) -> tuple[int, list[str]]:
    """Return (events checked, problems) of everything; no problems means the ledger verifies."""
    verified = await verification(recorder, workers=workers)
    return verified.checked, verified.problems


async def verification(recorder: Recorder, *, workers: int = 1, incremental: bool = False) -> Verification:
    """Verify the whole ledger, or (`incremental`) the events after the last checkpoint (the whole
    ledger when there is none): their chains, continuing from its heads, not the projections."""
    async with recorder.snapshot():
        last = await queries.last_position(recorder)
        start = await checkpoints.latest(recorder) if incremental else None
        first, heads = (start.verified.upto + 1, start.heads()) if start else (1, {})
        async with Crew(workers_for(recorder, last - first + 1, workers)) as crew:
            spans = position_ranges(first, last, crew.workers)
            results = await crew.map(chains.check_range, [
                ([recorder], (a, b, heads if a == first and start else None)) for a, b in spans])
            for _, _, found in results:
                heads.update(found)
            checked, problems = sum(n for n, _, _ in results), [p for _, found, _ in results for p in found]
            if start:
                problems = await chains.heads_changed(recorder, start.heads(), start.verified.upto) + problems
            if problems or start:
                return Verification(checked, problems, last, heads, full=False)
            return Verification(checked, await _verify_projections(crew, recorder, last), last, heads, full=True)


def workers_for(recorder: Recorder, events: int, asked: int) -> int:
    """The processes to split `events` over: as `asked`, or (0) one per core for a large ledger."""
    if recorder.url.endswith(":memory:"):
        return 1  # no other process can open it
    if asked > 0:
        return asked
    return min(os.cpu_count() or 1, MAX_AUTO_WORKERS) if events >= PARALLEL_FROM else 1


async def _verify_projections(crew: Crew, recorder: Recorder, last: int) -> list[str]:
    shares = await stream_ranges(recorder, crew.workers) if crew.workers > 1 else [EVERY_STREAM]
    async with Scratches(recorder, len(shares)) as scratches:
        await _rebuild_shares(crew, recorder, scratches, shares, last)
        for table in projections.TABLES:
            for scratch, share in zip(scratches, shares, strict=True):
                orgs = None if share == EVERY_STREAM else share
                if difference := await first_difference(table, recorder, scratch, orgs=orgs):
                    return [difference]
    return []


async def _rebuild_shares(crew: Crew, recorder: Recorder, scratches: list[Recorder], shares: list[StreamRange],
                          upto: int) -> None:
    await crew.map(rebuild_share, [([recorder, scratch], (share, upto))
                                   for scratch, share in zip(scratches, shares, strict=True)])


class Scratches:
    """`count` new scratch stores beside `recorder`, open while entered, removed after."""

    def __init__(self, recorder: Recorder, count: int) -> None:
        self.stores = [recorder.scratch() for _ in range(count)]

    async def __aenter__(self) -> list[Recorder]:
        for store in self.stores:
            await store.open()
        return self.stores

    async def __aexit__(self, *exc: object) -> None:
        for store in self.stores:
            await store.close()


async def first_difference(table: str, stored: Recorder, replayed: Recorder, page: int = PAGE_ROWS,
                           orgs: StreamRange | None = None) -> str | None:
    """The first row where two copies of a projection table differ (of the orgs in a range, when
    given), or None if identical. Both are read page by page in key order, so memory holds two
    pages whatever the table's size."""
    after: tuple | None = None
    width, seen = projections.key_width(table), 0
    where = "" if orgs is None else f" (orgs from {orgs[0]!r})"
    while True:
        sql, params = projections.select_page(table, after, page, orgs)
        ours, theirs = await stored._fetch(sql, params), await replayed._fetch(sql, params)
        if ours != theirs:  # whole pages first: a healthy ledger never looks at a row on its own
            for index, (a, b) in enumerate(zip(ours, theirs, strict=False)):  # the lengths are compared next
                if tuple(a) != tuple(b):
                    row_a, row_b = tuple(a[width:]), tuple(b[width:])
                    return f"{table}{where}: row {seen + index} differs: stored {row_a!r} != replayed {row_b!r}"
        if len(ours) != len(theirs):
            return await _counts_differ(table, stored, replayed, orgs, where)
        if len(ours) < page:
            return None
        after, seen = tuple(ours[-1][:width]), seen + page


async def _counts_differ(table: str, stored: Recorder, replayed: Recorder, orgs: StreamRange | None,
                         where: str) -> str:
    sql, params = projections.count_rows(table, orgs)
    [(ours,)], [(theirs,)] = await stored._fetch(sql, params), await replayed._fetch(sql, params)
    return f"{table}{where}: {ours} stored rows != {theirs} replayed rows"


async def replay(recorder: Recorder, progress: Progress | None = None, *, workers: int = 1,
                 tables: Sequence[str] = tuple(projections.TABLES)) -> int:
    """Rebuild projection `tables` (all of them unless named) from events alone, beside the live
    ones, and swap them in; returns the position the swapped tables hold."""
    if unknown := set(tables) - set(projections.TABLES):
        raise ValueError(f"no such projection: {', '.join(sorted(unknown))}")
    since = await queries.last_position(recorder)
    async with Crew(workers_for(recorder, since, workers)) as crew:
        shares = await stream_ranges(recorder, crew.workers) if crew.workers > 1 else [EVERY_STREAM]
        async with Scratches(recorder, len(shares)) as scratches:
            if crew.workers == 1:
                await scratches[0].rebuild(batches(recorder, upto=since, progress=progress), reset=False)
            else:
                await _rebuild_shares(crew, recorder, scratches, shares, since)
            return await recorder.swap_in(scratches, tables, since)


async def keep_verified(recorder: Recorder, *, workers: int = 1, incremental: bool = True
                        ) -> tuple[Verification, int | None]:
    """Verify (from the last checkpoint, unless not `incremental`) and, when the ledger verifies
    and has moved on since that checkpoint, record a new one; returns the verification and the
    new checkpoint's position (None: none recorded)."""
    verified = await verification(recorder, workers=workers, incremental=incremental)
    previous = await checkpoints.latest(recorder)
    if verified.problems or (previous is not None and verified.upto <= previous.position):
        return verified, None
    return verified, await checkpoints.record(recorder, verified.upto, verified.heads, full=verified.full)
