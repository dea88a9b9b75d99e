"""Checkpoints: a verified prefix of the log, remembered as an event so the next verification
starts where the last one ended, and signed so customers can hold the operator to it.

A checkpoint (ledger.events.LedgerVerified) is a signed tree head: the size of the log's Merkle
tree (ledger.tree) at the last position verified, its root, and the C2SP signed note stating both
(ledger.notes), of the same size whatever the number of organizations or events. A routine
verification checks only the events after it (ledger.audit). Checkpoints recorded before trees
(`legacy`) named every stream's head instead, with an Ed25519 signature over the root of those
heads (ledger.signing); they stay verifiable. Checkpoints live in a stream of their own, which no
projection reads.
"""

import time
from collections.abc import Iterable
from typing import NamedTuple

import msgspec

import base64
from datetime import UTC, datetime

from ledger import notes, signing, tree
from ledger.chains import Head
from ledger.events import LedgerVerified, StreamHead, decode_event
from ledger.export import instant
from ledger.recorder import Append, CorruptEvent, LedgerError, Recorder

STREAM = "$ledger"  # no org id starts with "$"
HEADS_READ = 1_000_000  # tree heads read at most (one every five minutes: ~9 years)
ORIGIN = "ai-gateway/ledger"  # the log's name in its checkpoints' notes ([ledger] log_origin)
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

    @property
    def legacy(self) -> bool:
        """Recorded before checkpoints were tree heads: it names every stream's head instead."""
        return self.verified.tree_size == 0

    def moved_on(self, heads: dict[str, Head], last: int) -> bool:
        """Whether the log has moved on from this checkpoint: by any event after it (a tree
        head), or by any stream but the checkpoints' own (a legacy one, from its heads)."""
        if not self.legacy:
            return last > self.position
        ours = {stream: head for stream, head in self.heads().items() if stream != STREAM}
        return ours != {stream: head for stream, head in heads.items() if stream != STREAM}

    def published(self) -> dict:
        """What anyone may see of a tree head: its size, root, time and signed note."""
        verified = self.verified
        return {"tree_size": verified.tree_size, "root_hash": verified.root,
                "recorded_at": instant(self.recorded_at_us), "note": verified.note, "key_id": verified.key_id,
                "position": self.position}

    def published_legacy(self) -> dict:
        """What anyone may see of a legacy checkpoint (ledger.export_check.Published): its root and
        leaves, never a stream's name or head, with the signature and the key that made it."""
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


async def tree_heads(recorder: Recorder) -> dict[int, str]:
    """Every tree head recorded: its size and root (base64)."""
    return {c.verified.tree_size: c.verified.root for c in await newest(recorder, None, HEADS_READ) if not c.legacy}


def signed(event: LedgerVerified, signer: signing.Signer) -> LedgerVerified:
    """`event` with the signer's signature over its position and the root of its heads."""
    root = signing.root(leaves(event.heads))
    return msgspec.structs.replace(event, key_id=signer.key_id, public_key=signer.public_b64,
                                   signature=signer.sign(signing.message(event.upto, root)))


async def record(recorder: Recorder, upto: int, heads: dict[str, Head], *, full: bool,
                 signer: signing.Signer | None = None) -> int:
    """Remember, as a legacy checkpoint, that the log up to `upto` verified with these heads
    (signed, given a signer); returns the checkpoint's position. Only tests make these now."""
    event = LedgerVerified(upto=upto, full=full, heads=tuple(
        StreamHead(stream, version, digest.hex()) for stream, (version, digest) in sorted(heads.items())))
    return await _append(recorder, signed(event, signer) if signer else event)


async def record_tree(recorder: Recorder, upto: int, *, full: bool, signer: signing.Signer | None = None,
                      origin: str = ORIGIN, batch: int = tree.READ_BATCH) -> int:
    """Grow the tree to `upto` (verified; `batch` events at a time) and record its head, signed as a
    note given a signer; returns the checkpoint's position."""
    if await tree.grow(recorder, upto, batch) < upto:
        raise LedgerError(f"the Merkle tree could not be grown to {upto} events")
    root = await tree.root(recorder, upto)
    body = notes.text(origin, upto, root, (f"time {_time(recorder.clock())}",))
    event = LedgerVerified(upto=upto, heads=(), full=full, tree_size=upto, root=base64.b64encode(root).decode(),
                           note=body)
    if signer is not None:
        signature = base64.b64decode(signer.sign(body.encode()))
        event = msgspec.structs.replace(event, key_id=signer.key_id, public_key=signer.public_b64,
                                        signature=base64.b64encode(signature).decode(),
                                        note=notes.signed(body, origin, signer.public_raw, signature))
    return await _append(recorder, event)


def _time(at_us: int) -> str:
    return datetime.fromtimestamp(at_us / 1e6, UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


async def _append(recorder: Recorder, event: LedgerVerified) -> int:
    [outcome] = await recorder.append([Append(STREAM, [event])])
    if isinstance(outcome, Exception):
        raise outcome
    return outcome[0].position
