"""Splitting the log for parallel work: position ranges for chains, stream ranges for projections.

A stream's events depend on one another (its chain, its org's rows), so projections are rebuilt
per share of the streams, each share in a process of its own; chains need only the head before a
range (ledger.chains), so they are checked per share of the positions.
"""

from ledger.recorder import Recorder

StreamRange = tuple[str, str | None]  # streams named from the first up to, not including, the second
FIRST_STREAMS = "SELECT count(*) FROM events WHERE version = 1"
NTH_STREAM = "SELECT stream_id FROM events WHERE version = 1 ORDER BY stream_id LIMIT 1 OFFSET ?"


def position_ranges(first: int, last: int, shares: int) -> list[tuple[int, int]]:
    """[first, last] cut into at most `shares` consecutive ranges of nearly equal size (none if empty)."""
    size = last - first + 1
    shares = max(1, min(shares, size))
    bounds = [first - 1 + size * n // shares for n in range(shares + 1)]
    return [(bounds[n] + 1, bounds[n + 1]) for n in range(shares) if bounds[n + 1] > bounds[n]]


async def stream_ranges(recorder: Recorder, shares: int) -> list[StreamRange]:
    """Every stream name, from "" on, cut into at most `shares` ranges holding about as many streams."""
    [(streams,)] = await recorder._fetch(FIRST_STREAMS)
    cuts: list[str] = []
    for n in range(1, max(1, min(shares, streams))):
        [(name,)] = await recorder._fetch(NTH_STREAM, [streams * n // shares])
        if not cuts or name > cuts[-1]:
            cuts.append(name)
    starts = ["", *cuts]
    return [(start, end) for start, end in zip(starts, [*cuts, None], strict=True)]


def streams_after(select: str, after: int, limit: int, low: str, high: str | None) -> tuple[str, tuple]:
    """`select` (events) narrowed to a stream range after a position, in position order. The
    concatenation keeps the database from reading through the stream index and sorting."""
    where = "position > ? AND (stream_id || '') >= ?" + (" AND (stream_id || '') < ?" if high is not None else "")
    return (f"{select} WHERE {where} ORDER BY position LIMIT ?",
            (after, low, *(() if high is None else (high,)), limit))
