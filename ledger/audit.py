"""Replay and verification: the log alone must explain every projection row.

`verify` checks the global positions are gapless, every stream's versions are gapless, every
hash links to its predecessor (ledger.chains), and that a replay of all events into scratch
stores yields exactly the stored projection tables, reading each event once for both. From a
checkpoint (ledger.checkpoints) it checks only the chains of what came after. `replay` rebuilds
projections beside the live ones and swaps them in. Both hold a batch of events, each stream's
head and a page of each projection at a time, so their memory does not grow with the ledger; with
`workers` above one, each process takes a share of the streams (ledger.partitions, ledger.parallel).
"""

import os
from collections.abc import AsyncIterator, Callable, Sequence
from typing import NamedTuple

from ledger import chains, checkpoints, projections, queries, tree_audit
from ledger.chains import Head
from ledger.parallel import Crew
from ledger.partitions import StreamRange, stream_ranges
from ledger.signing import Signer
from ledger.recorder import CorruptEvent, LedgerError, Recorded, Recorder

Progress = Callable[[int, int], None]
PAGE_ROWS = 5000  # rows of each copy of a projection compared at once: what verify's memory holds
BATCH = 5000  # events a rebuild folds at once
EVERY_STREAM: StreamRange = ("", None)
PARALLEL_FROM = 200_000  # events from which `workers=0` splits the work: below, starting processes costs more
MAX_AUTO_WORKERS = 8


async def batches(recorder: Recorder, *, after: int = 0, upto: int | None = None, size: int = BATCH,
                  progress: Progress | None = None) -> AsyncIterator[list[Recorded]]:
    """Every event after position `after` in position order, in batches, stopping at `upto` if given."""
    total = upto or 0
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
    for after in range(0, upto, size):  # a window of positions at a time: some hold none of the share's
        if batch := await recorder.read_streams(after, min(size, upto - after), *streams):
            yield batch


async def rebuild_share(live: Recorder, scratch: Recorder, streams: StreamRange, upto: int) -> None:
    """Project a share of the streams' events, up to `upto`, into an empty scratch store."""
    await scratch.rebuild(share_of(live, streams, upto))


async def verify_share(live: Recorder, scratch: Recorder, streams: StreamRange, upto: int
                       ) -> tuple[int, list[str], dict[str, Head]]:
    """Check a share of the streams' chains up to `upto` while projecting its events into an empty
    scratch store, reading each event once: (events checked, problems, each stream's head)."""
    heads: dict[str, Head] = {}
    problems: list[str] = []
    counted = [0, 0]  # events checked, the last position (when the share is every stream)

    async def checked() -> AsyncIterator[list[Recorded]]:
        async for batch in share_of(live, streams, upto):
            if streams == EVERY_STREAM:  # the whole log in order: its positions are checked here too
                counted[1], found = chains.check_chain(batch, heads, counted[1])
            else:
                found = chains.check_links(batch, heads)
            problems.extend(found)
            counted[0] += len(batch)
            yield batch

    try:
        await scratch.rebuild(checked())
    except CorruptEvent as exc:
        return 0, [str(exc)], heads
    except LedgerError as exc:  # a log the chains already fault may not even project
        return counted[0], problems or [f"the log does not replay: {exc}"], heads
    return counted[0], problems, heads


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


async def verification(recorder: Recorder, *, workers: int = 1, incremental: bool = False,
                       with_projections: bool = True, batch: int = chains.BATCH) -> Verification:
    """Verify the whole ledger, or (`incremental`) the events after the last checkpoint (the whole
    ledger when there is none): their chains, continuing from its heads, not the projections.
    Without `with_projections`, a whole verification checks the chains alone, in this process.
    A chain check reads `batch` events at a time (a server's smaller: it holds the loop per batch)."""
    async with recorder.snapshot():
        last = await queries.last_position(recorder)
        if incremental and (start := await checkpoints.latest(recorder)) is not None:
            return await _from_checkpoint(recorder, start, last, batch)
        if not with_projections:
            checked, problems, heads = await chains.check_range(recorder, 1, last, size=batch)
            return Verification(checked, problems, last, heads, full=False)
        async with Crew(workers_for(recorder, last, workers)) as crew:
            verified = await _verify_all(crew, recorder, last)
        if verified.problems:
            return verified
        return verified._replace(problems=await tree_audit.rebuilt(recorder))


async def _from_checkpoint(recorder: Recorder, start: checkpoints.Checkpoint, last: int, batch: int
                           ) -> Verification:
    if not start.legacy:
        checked, problems, heads = await tree_audit.continued(recorder, start, last, batch)
        return Verification(checked, problems, last, heads, full=False)
    checked, problems, heads = await chains.check_range(recorder, start.verified.upto + 1, last, start.heads(), batch)
    problems = await chains.heads_changed(recorder, start.heads(), start.verified.upto) + problems
    return Verification(checked, problems, last, heads, full=False)


async def _verify_all(crew: Crew, recorder: Recorder, last: int) -> Verification:
    shares = await stream_ranges(recorder, crew.workers) if crew.workers > 1 else [EVERY_STREAM]
    async with Scratches(recorder, len(shares)) as scratches:
        results = await crew.map(verify_share, [([recorder, scratch], (share, last))
                                                for scratch, share in zip(scratches, shares, strict=True)])
        checked, problems = sum(n for n, _, _ in results), [p for _, found, _ in results for p in found]
        heads = {stream: head for _, _, found in results for stream, head in found.items()}
        if len(shares) > 1 and not await chains.gapless(recorder, last):
            checked, problems, heads = await chains.check_range(recorder, 1, last)  # one pass says where
        if problems:
            return Verification(checked, problems, last, heads, full=False)
        return Verification(checked, await _compare(recorder, scratches, shares), last, heads, full=True)


async def _compare(recorder: Recorder, scratches: list[Recorder], shares: list[StreamRange]) -> list[str]:
    """The first difference between the stored projections and the replayed shares, if any."""
    for table in projections.TABLES:
        for scratch, share in zip(scratches, shares, strict=True):
            orgs = None if share == EVERY_STREAM else share
            if difference := await first_difference(table, recorder, scratch, orgs=orgs):
                return [difference]
    return []


def workers_for(recorder: Recorder, events: int, asked: int) -> int:
    """The processes to split `events` over: as `asked`, or (0) one per core for a large ledger."""
    if recorder.url.endswith(":memory:"):
        return 1  # no other process can open it
    if asked > 0:
        return asked
    return min(os.cpu_count() or 1, MAX_AUTO_WORKERS) if events >= PARALLEL_FROM else 1


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
                await scratches[0].rebuild(batches(recorder, upto=since, progress=progress))
            else:
                await _rebuild_shares(crew, recorder, scratches, shares, since)
            await scratches[0].absorb(scratches[1:], tables)
            return await recorder.swap_in(scratches[0], tables, Follower(recorder, scratches[0], since).catch_up)


class Follower:
    """Keeps a rebuilt store up to date with the log while it is being swapped in."""

    def __init__(self, live: Recorder, rebuilt: Recorder, since: int) -> None:
        self.live, self.rebuilt, self.caught = live, rebuilt, since

    async def catch_up(self) -> int:
        """Project what was appended since the last call into the rebuilt store (under the live
        store's write lock: nothing more comes meanwhile); the position it then holds."""
        end = await queries.last_position(self.live)
        if end > self.caught:
            await self.rebuilt.rebuild(batches(self.live, after=self.caught, upto=end))
            self.caught = end
        return end


async def keep_verified(recorder: Recorder, *, workers: int = 1, incremental: bool = True,
                        signer: Signer | None = None, with_projections: bool = True, batch: int = chains.BATCH,
                        origin: str = checkpoints.ORIGIN) -> tuple[Verification, int | None]:
    """Verify (from the last checkpoint, unless not `incremental`) and, when the ledger verifies
    and has moved on since that checkpoint, grow the tree and record its head (signed, given a
    signer); returns the verification and the new checkpoint's position (None: none recorded)."""
    verified = await verification(recorder, workers=workers, incremental=incremental,
                                  with_projections=with_projections, batch=batch)
    previous = await checkpoints.latest(recorder)
    if verified.problems or not verified.upto or (
            previous is not None and not previous.moved_on(verified.heads, verified.upto)):
        return verified, None
    return verified, await checkpoints.record_tree(recorder, verified.upto, full=verified.full, signer=signer,
                                                   origin=origin, batch=batch)
