"""Checkpoints: a verified prefix of the log, remembered as an event so the next verification
starts where the last one ended.

A checkpoint (ledger.events.LedgerVerified) names the last position verified and every stream's
head there. A routine verification checks only the events after it: that they run on gapless from
it and that each stream's chain continues from the head the checkpoint names, so a rewrite of a
stream's head is caught too; `verify --full` checks everything again. Checkpoints live in a stream
of their own, which no projection reads.
"""

import time
from typing import NamedTuple

from ledger.chains import Head
from ledger.events import LedgerVerified, StreamHead, decode_event
from ledger.recorder import Append, CorruptEvent, Recorder

STREAM = "$ledger"  # no org id starts with "$"
LATEST = ("SELECT position, recorded_at_us, data FROM events WHERE stream_id = ?"
          " ORDER BY version DESC LIMIT 1")


class Checkpoint(NamedTuple):
    position: int  # where the checkpoint itself is recorded
    recorded_at_us: int
    verified: LedgerVerified

    def heads(self) -> dict[str, Head]:
        return {h.stream_id: (h.version, bytes.fromhex(h.hash)) for h in self.verified.heads}

    def age_s(self, now_us: int | None = None) -> float:
        return ((time.time_ns() // 1000 if now_us is None else now_us) - self.recorded_at_us) / 1e6


async def latest(recorder: Recorder) -> Checkpoint | None:
    """The last checkpoint recorded, if any."""
    rows = await recorder._fetch(LATEST, [STREAM])
    if not rows:
        return None
    [(position, at, data)] = rows
    event = decode_event(bytes(data))
    if not isinstance(event, LedgerVerified):
        raise CorruptEvent(f"event at position {position} in the checkpoint stream is not a checkpoint")
    return Checkpoint(position, at, event)


async def record(recorder: Recorder, upto: int, heads: dict[str, Head], *, full: bool) -> int:
    """Remember that the log up to `upto` verified with these heads; returns the checkpoint's position."""
    event = LedgerVerified(upto=upto, full=full, heads=tuple(
        StreamHead(stream, version, digest.hex()) for stream, (version, digest) in sorted(heads.items())))
    [outcome] = await recorder.append([Append(STREAM, [event])])
    if isinstance(outcome, Exception):
        raise outcome
    return outcome[0].position
