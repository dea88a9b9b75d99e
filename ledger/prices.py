"""The stream of price switches: each catalogue a deployment put in force, and when
(ledger.events.CatalogueSwitched). Every gateway process follows it, so all switch together."""

from collections.abc import Sequence
from typing import NamedTuple

import msgspec

from ledger.events import CatalogueSwitched
from ledger.recorder import Append, CorruptEvent, Recorded, Recorder

STREAM = "$prices"  # no org id starts with "$"
_ENCODER = msgspec.json.Encoder()
NEWEST = "SELECT position FROM events WHERE stream_id = ? ORDER BY version DESC LIMIT 1"


class Switched(NamedTuple):
    """A CatalogueSwitched event where the log holds it."""

    position: int
    version: int  # in the prices stream
    recorded_at_us: int
    event: CatalogueSwitched


def content(switched: Switched) -> bytes:
    """The catalogue a switch put in force, as a catalogue file."""
    return _ENCODER.encode(switched.event.catalogue)


def switched(recorded: Recorded) -> Switched | None:
    """The switch `recorded` is, if it is one."""
    if recorded.stream_id != STREAM:
        return None
    if not isinstance(recorded.event, CatalogueSwitched):
        raise CorruptEvent(f"event at position {recorded.position} in the prices stream is not a price switch")
    return Switched(recorded.position, recorded.version, recorded.recorded_at_us, recorded.event)


async def every(recorder: Recorder) -> list[Switched]:
    """Every switch recorded, oldest first."""
    return [s for s in map(switched, await recorder.read_stream(STREAM)) if s is not None]


async def at(recorder: Recorder, position: int) -> Switched | None:
    """The switch recorded at `position` (None if none is)."""
    found = await recorder.read(position - 1, 1)
    return switched(found[0]) if found and found[0].position == position else None


async def latest(recorder: Recorder) -> Switched | None:
    """The last switch recorded, if any."""
    rows = await recorder._fetch(NEWEST, [STREAM])
    return await at(recorder, rows[0][0]) if rows else None


async def record(recorder: Recorder, event: CatalogueSwitched, after: int) -> Sequence[Recorded]:
    """Append `event` as the stream's next after version `after` (0: its first); ConcurrencyError
    when another process switched first."""
    [outcome] = await recorder.append([Append(STREAM, [event], expected_version=after)])
    if isinstance(outcome, Exception):
        raise outcome
    return outcome
