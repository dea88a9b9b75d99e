"""Splitting the log for parallel work: shares of the streams, by name.

A stream's events depend on one another (its chain, its org's projection rows) and on nothing
else, so a share of the streams is verified and replayed on its own, in a process of its own;
every projection row is of one org (org_id), so a share's rows are its orgs' rows.
"""

from ledger.recorder import Recorder

StreamRange = tuple[str, str | None]  # streams named from the first up to, not including, the second
FIRST_STREAMS = "SELECT count(*) FROM events WHERE version = 1"
NTH_STREAM = "SELECT stream_id FROM events WHERE version = 1 ORDER BY stream_id LIMIT 1 OFFSET ?"


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


def streams_after(select: str, after: int, span: int, low: str, high: str | None) -> tuple[str, tuple]:
    """`select` (events) narrowed to a stream range and the positions after `after` up to
    `after + span`, in position order. Bounding the positions keeps every read a short walk of the
    position index whatever plan the database picks (a share may hold few of them); the
    concatenation keeps it from reading through the stream index and sorting."""
    where = "position > ? AND position <= ? AND (stream_id || '') >= ?" + (
        " AND (stream_id || '') < ?" if high is not None else "")
    return (f"{select} WHERE {where} ORDER BY position",
            (after, after + span, low, *(() if high is None else (high,))))
