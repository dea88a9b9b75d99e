"""An organization's own events, exported as NDJSON: what a customer verifies their bill from.

One line an event, oldest first: where it sits (`position` in the log, `version` in its stream),
when it was recorded (`recorded_at`, and exactly, `recorded_at_us`), its chain hash and its
predecessor's (`hash`, `prev_hash`, hex), then the event's own fields exactly as stored, `type`
first. The stored bytes of the event are the line from `"type"` on, so a verifier
(ledger.export_check) recomputes each chain hash from the line alone. Only the org's own stream
is read: other orgs' events, keys and secrets never appear (a key shows only as the SHA-256 it
is stored as; retained text only as its content hash).

Pages are read by version through the (stream, version) index, so an export streams in bounded
memory at any depth; where it starts (a position, a time) is found by bisecting the versions.
Within a stream, positions rise with versions, and so do recorded times (each append takes the
clock under the write lock); a clock set back would make a time range inexact, never a chain.
"""

from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

import msgspec

from ledger import queries
from ledger.recorder import GENESIS_HASH, Recorder

PAGE = 1000
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
ROWS = ("SELECT position, version, recorded_at_us, data, hash FROM events WHERE stream_id = ? AND version > ?"
        " ORDER BY version LIMIT ?")
AT_VERSION = "SELECT position, recorded_at_us, hash FROM events WHERE stream_id = ? AND version = ?"
_encode = msgspec.json.Encoder().encode


class Window(NamedTuple):
    """Which of a stream's events to export: after a position, recorded in [from_us, to_us), at most `limit`."""

    after: int = 0
    from_us: int | None = None
    to_us: int | None = None
    limit: int | None = None


EVERYTHING = Window()


def instant(us: int) -> str:
    """A recorded time in ISO 8601, UTC, to the microsecond."""
    return (EPOCH + timedelta(microseconds=us)).isoformat(timespec="microseconds").replace("+00:00", "Z")


def parse_instant(text: str) -> int:
    """An ISO 8601 time (UTC when it names no offset) in microseconds since the epoch, exactly;
    ValueError naming it when it is not one."""
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{text!r} is not an ISO 8601 time such as 2026-12-31T00:00:00Z") from None
    return ((moment if moment.tzinfo else moment.replace(tzinfo=UTC)) - EPOCH) // timedelta(microseconds=1)


def envelope(stream_id: str, position: int, version: int, recorded_at_us: int, chain_hash: bytes,
             prev_hash: bytes, recorded_at: bytes | None = None) -> bytes:
    """A line's head, before the event's own fields: the same bytes for the same values, always
    (`recorded_at`, when given, is instant(recorded_at_us), already written)."""
    stamp = instant(recorded_at_us).encode() if recorded_at is None else recorded_at
    return (b'{"position":%d,"stream_id":%s,"version":%d,"recorded_at":"%s","recorded_at_us":%d,'
            b'"hash":"%s","prev_hash":"%s",' % (position, _encode(stream_id), version, stamp, recorded_at_us,
                                                chain_hash.hex().encode(), prev_hash.hex().encode()))


def line(stream_id: str, row: tuple, prev_hash: bytes, recorded_at: bytes | None = None) -> bytes:
    """One event row (position, version, recorded_at_us, data, hash) as an export line."""
    position, version, at, data, chain_hash = row
    return envelope(stream_id, position, version, at, bytes(chain_hash), prev_hash, recorded_at) + bytes(data)[1:] \
        + b"\n"


async def lines(recorder: Recorder, stream_id: str, window: Window = EVERYTHING) -> AsyncIterator[bytes]:
    """The export of `stream_id`'s events in `window`, a page of lines at a time."""
    version = await _first_version(recorder, stream_id, window) - 1
    prev = GENESIS_HASH if version == 0 else bytes((await _at(recorder, stream_id, version))[2])
    left = window.limit if window.limit is not None else 2**62
    stamp = (-1, b"")  # the last time written: the events of one append share theirs
    while left > 0 and (rows := await recorder._fetch(ROWS, [stream_id, version, min(PAGE, left)])):
        page = []
        for row in rows:
            if window.to_us is not None and row[2] >= window.to_us:
                left = 0
                break
            stamp = stamp if stamp[0] == row[2] else (row[2], instant(row[2]).encode())
            page.append(line(stream_id, row, prev, stamp[1]))
            prev, version, left = bytes(row[4]), row[1], left - 1
        if page:
            yield b"".join(page)


async def _at(recorder: Recorder, stream_id: str, version: int) -> tuple:
    [row] = await recorder._fetch(AT_VERSION, [stream_id, version])
    return row


async def _first_version(recorder: Recorder, stream_id: str, window: Window) -> int:
    """The first version of the stream after `window.after` recorded from `window.from_us` on
    (the head's version + 1 when none)."""
    if window.after <= 0 and window.from_us is None:
        return 1  # from the start: nothing to look for
    head = await queries.stream_version(recorder, stream_id)

    async def inside(version: int) -> bool:
        position, at, _ = await _at(recorder, stream_id, version)
        return position > window.after and (window.from_us is None or at >= window.from_us)
    return await _bisect(1, head + 1, inside)


async def _bisect(low: int, high: int, holds: Callable[[int], Awaitable[bool]]) -> int:
    """The least n in [low, high) for which `holds` (false, then true) is true; `high` when none."""
    while low < high:
        middle = (low + high) // 2
        if await holds(middle):
            high = middle
        else:
            low = middle + 1
    return low
