"""Checkpoints: a verified prefix of the log, remembered as an event so the next verification
starts where the last one ended, and signed so customers can hold the operator to it.

A checkpoint (ledger.events.LedgerVerified) names the last position verified and every stream's
head there. A routine verification checks only the events after it: that they run on gapless from
it and that each stream's chain continues from the head the checkpoint names, so a rewrite of a
stream's head is caught too; `verify --full` checks everything again. Checkpoints live in a stream
of their own, which no projection reads. Recorded with a signing key, a checkpoint carries an
Ed25519 signature over the root of its heads (ledger.signing), published with its leaves.
"""

import time
from collections.abc import Iterable
from typing import NamedTuple

import msgspec

from ledger import signing
from ledger.chains import Head
from ledger.events import LedgerVerified, StreamHead, decode_event
from ledger.export import instant
from ledger.recorder import Append, CorruptEvent, Recorder

STREAM = "$ledger"  # no org id starts with "$"
NEWEST_FIRST = ("SELECT position, recorded_at_us, data FROM events WHERE stream_id = ? AND position < ?"
                " ORDER BY version DESC LIMIT ?")


class Checkpoint(NamedTuple):
    position: int  # where the checkpoint itself is recorded
    recorded_at_us: int
    verified: LedgerVerified

    def heads(self) -> dict[str, Head]:
        return {h.stream_id: (h.version, bytes.fromhex(h.hash)) for h in self.verified.heads}

    def age_s(self, now_us: int | None = None) -> float:
        return ((time.time_ns() // 1000 if now_us is None else now_us) - self.recorded_at_us) / 1e6

    def leaves(self) -> list[bytes]:
        return leaves(self.verified.heads)

    def moved_on(self, heads: dict[str, Head]) -> bool:
        """Whether any stream but the checkpoints' own has moved on from this checkpoint's heads."""
        ours = {stream: head for stream, head in self.heads().items() if stream != STREAM}
        return ours != {stream: head for stream, head in heads.items() if stream != STREAM}

    def published(self) -> dict:
        """What anyone may see of it (ledger.export_check.Published): its root and leaves, never a
        stream's name or head, with the signature and the key that made it."""
        verified, found = self.verified, self.leaves()
        return {"position": self.position, "recorded_at": instant(self.recorded_at_us), "upto": verified.upto,
                "full": verified.full, "streams": len(found), "root": signing.root(found).hex(),
                "leaves": [leaf.hex() for leaf in found], "key_id": verified.key_id,
                "public_key": verified.public_key, "signature": verified.signature}


def leaves(heads: Iterable[StreamHead]) -> list[bytes]:
    """What a checkpoint publishes of each stream's head (ledger.signing.leaf), sorted."""
    return sorted(signing.leaf(h.stream_id, h.version, bytes.fromhex(h.hash)) for h in heads)


def _checkpoint(position: int, at: int, data: bytes) -> Checkpoint:
    event = decode_event(bytes(data))
    if not isinstance(event, LedgerVerified):
        raise CorruptEvent(f"event at position {position} in the checkpoint stream is not a checkpoint")
    return Checkpoint(position, at, event)


async def latest(recorder: Recorder) -> Checkpoint | None:
    """The last checkpoint recorded, if any."""
    return next(iter(await newest(recorder, None, 1)), None)


async def newest(recorder: Recorder, before: int | None, limit: int) -> list[Checkpoint]:
    """Up to `limit` checkpoints recorded before position `before` (None: all), newest first."""
    rows = await recorder._fetch(NEWEST_FIRST, [STREAM, 2**63 - 1 if before is None else before, limit])
    return [_checkpoint(*row) for row in rows]


def signed(event: LedgerVerified, signer: signing.Signer) -> LedgerVerified:
    """`event` with the signer's signature over its position and the root of its heads."""
    root = signing.root(leaves(event.heads))
    return msgspec.structs.replace(event, key_id=signer.key_id, public_key=signer.public_b64,
                                   signature=signer.sign(signing.message(event.upto, root)))


async def record(recorder: Recorder, upto: int, heads: dict[str, Head], *, full: bool,
                 signer: signing.Signer | None = None) -> int:
    """Remember that the log up to `upto` verified with these heads (signed, given a signer);
    returns the checkpoint's position."""
    event = LedgerVerified(upto=upto, full=full, heads=tuple(
        StreamHead(stream, version, digest.hex()) for stream, (version, digest) in sorted(heads.items())))
    [outcome] = await recorder.append([Append(STREAM, [signed(event, signer) if signer else event])])
    if isinstance(outcome, Exception):
        raise outcome
    return outcome[0].position
