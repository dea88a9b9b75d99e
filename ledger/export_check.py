"""Checking an organization's export offline: `gateway ledger check-export FILE`, or with nothing
but this package installed, `python -m ledger.export_check FILE [--checkpoints FILE]`.

Reads the export (ledger.export) a line at a time and stops at the first line that is not as the
ledger recorded it: a line whose chain hash is not that of its own bytes and its predecessor's
(a changed byte), a version that does not follow the last (an event dropped, or two reordered), a
request whose cost is not its tokens at its prices and rate or whose charge breaks the billing
rule (ledger.charges), and, given the published price versions (`--prices DIR`), a charge whose
prices are not those its version published for its tier at its time (ledger.price_check). It
sums the credits, charges and holds into the balance. Given the
published checkpoints (GET /v1/ledger/checkpoints) and the operator's proofs (`--proofs`, from
`gateway ledger fetch-proofs`), it verifies each tree head's signed note, that every tree head
extends the one before it, and that the export's newest event under each is a leaf of its tree
(ledger.proof_check): history rewritten, dropped or forked between checkpoints shows. Checkpoints
from before tree heads (with every stream's leaf) are held as they were: the stream's head at each
must be among its signed leaves (ledger.signing).
"""

import argparse
import base64
import json
import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

import msgspec

from ledger import charges, signing
from ledger.proof_check import ProofMismatch, Proofs, TreeCheck, TreeHead
from ledger.events import CreditsAdded, CreditsHeld, HoldReleased, RequestCompleted, decode_event, event_type, is_slice
from ledger.export import envelope
from ledger.money import format_amount, from_nano
from ledger.price_check import PricesDir
from ledger.recorder import GENESIS_HASH, chain_hash


class Mismatch(Exception):
    """The first place the export is not what the ledger recorded, and why."""

    def __init__(self, line: int, position: int | None, why: str) -> None:
        where = [f"line {line}"] * (line > 0) + [f"position {position}"] * (position is not None)
        super().__init__(f"{', '.join(where)}: {why}" if where else why)
        self.line, self.position, self.why = line, position, why


class Envelope(msgspec.Struct, frozen=True):
    position: int
    stream_id: str
    version: int
    recorded_at_us: int
    hash: str
    prev_hash: str
    type: str


class Published(msgspec.Struct, frozen=True):
    """A checkpoint as GET /v1/ledger/checkpoints publishes it."""

    position: int
    upto: int
    root: str
    leaves: list[str]
    key_id: str = ""
    public_key: str = ""
    signature: str = ""


class PublicKey(msgspec.Struct, frozen=True):
    key_id: str
    public_key_pem: str


class PublishedCheckpoints(msgspec.Struct, frozen=True):
    """GET /v1/ledger/checkpoints: tree heads (and, in files from before them, legacy checkpoints)."""

    checkpoints: list[dict]
    public_keys: list[PublicKey] = []

    def legacy(self) -> list[Published]:
        return [msgspec.convert(c, Published) for c in self.checkpoints if "tree_size" not in c]

    def tree_heads(self) -> list[TreeHead]:
        return [msgspec.convert(c, TreeHead) for c in self.checkpoints if "tree_size" in c]

    def keys(self) -> dict[str, bytes]:
        return {key.key_id: signing.public_raw(key.public_key_pem.encode()) for key in self.public_keys}


class Seen(msgspec.Struct, frozen=True):
    """The last line read: where it was, and its chain hash."""

    position: int
    version: int
    hash: bytes


_envelope = msgspec.json.Decoder(Envelope).decode
LEADING_POSITION = re.compile(rb'\{"position":(\d{1,19}),')  # names a line too broken to read


def _hex(text: str, line: int, position: int, name: str) -> bytes:
    try:
        value = bytes.fromhex(text)
    except ValueError:
        value = b""
    if len(value) != 32:
        raise Mismatch(line, position, f"{name} is not a SHA-256 in hex")
    return value


def read_line(number: int, raw: bytes) -> tuple[Envelope, bytes, bytes, bytes]:
    """A line's envelope, its chain hash, the previous one, and the event's stored bytes."""
    raw = raw.rstrip(b"\r\n")
    if not raw:
        raise Mismatch(number, None, "an empty line: an export has none")
    try:
        head = _envelope(raw)
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        found = LEADING_POSITION.match(raw)
        raise Mismatch(number, int(found[1]) if found else None, f"not an export line ({exc})") from None
    digest, prev = (_hex(head.hash, number, head.position, "hash"),
                    _hex(head.prev_hash, number, head.position, "prev_hash"))
    prefix = envelope(head.stream_id, head.position, head.version, head.recorded_at_us, digest, prev)
    if not raw.startswith(prefix):
        raise Mismatch(number, head.position, "its position, time or hashes are not written as exported (changed)")
    return head, digest, prev, b"{" + raw[len(prefix):]


class Checker:
    """Feed it the export's lines in order (`feed`), then `finish` for the totals."""

    def __init__(self, published: Iterable[Published] = (), trusted: frozenset[str] | None = None,
                 partial: bool = False, prices: PricesDir | None = None, tree: TreeCheck | None = None) -> None:
        self.prices, self.tree = prices, tree
        self.tree_pending = [head.tree_size for head in tree.heads] if tree else []
        self.pending = sorted(published, key=lambda c: c.upto)
        self.partial = partial  # the export may begin after the stream's first event (?after=, --from)
        self.trusted = trusted
        self.stream_id = ""
        self.first: Seen | None = None
        self.last: Seen | None = None
        self.totals = dict.fromkeys(("credits", "charged", "held", "escrow", "requests", "recomputed"), 0)
        self.matched, self.unsigned, self.keys = 0, 0, set[str]()
        for checkpoint in self.pending:
            self._check_signature(checkpoint)

    def feed(self, number: int, raw: bytes) -> None:
        head, digest, prev, data = read_line(number, raw)
        self._follows(number, head, prev)
        if chain_hash(prev, head.position, head.stream_id, head.version, head.type, head.recorded_at_us,
                      data) != digest:
            raise Mismatch(number, head.position, "its hash is not the SHA-256 of its fields and the previous"
                                                  " hash: the line was changed")
        self._count(number, head, data)
        while self.pending and self.pending[0].upto < head.position:
            self._at_checkpoint(number, self.pending.pop(0))
        while self.tree_pending and self.tree_pending[0] < head.position:
            self._at_tree_head(number, self.tree_pending.pop(0))
        self.last = Seen(head.position, head.version, digest)
        self.first = self.first or self.last

    def _follows(self, number: int, head: Envelope, prev: bytes) -> None:
        last = self.last
        if last is None:
            self.stream_id = head.stream_id
            if head.version != 1 and not self.partial:
                raise Mismatch(number, head.position, f"the export begins at version {head.version}: "
                               f"{_missing(1, head.version - 1)} (a part of a stream is checked as partial)")
            if head.version == 1 and prev != GENESIS_HASH:
                raise Mismatch(number, head.position, "version 1 must follow the genesis hash (all zeros)")
            return
        if head.stream_id != self.stream_id:
            raise Mismatch(number, head.position, f"stream {head.stream_id!r} is not the export's ({self.stream_id!r})")
        if head.version != last.version + 1:
            why = (_missing(last.version + 1, head.version - 1) if head.version > last.version + 1
                   else f"version {head.version} comes after version {last.version}: events reordered or repeated")
            raise Mismatch(number, head.position, why)
        if prev != last.hash or head.position <= last.position:
            raise Mismatch(number, head.position, f"it does not follow version {last.version} (position"
                                                  f" {last.position}): its prev_hash or position is wrong")

    def _count(self, number: int, head: Envelope, data: bytes) -> None:
        try:
            event = decode_event(data)
        except (msgspec.DecodeError, UnicodeDecodeError) as exc:
            raise Mismatch(number, head.position, f"not a ledger event ({exc})") from None
        if event_type(event) != head.type:
            raise Mismatch(number, head.position, f"its type is {event_type(event)}, not {head.type}")
        totals = self.totals
        match event:
            case CreditsAdded(amount_inr_nano=amount):
                totals["credits"] += amount
            case CreditsHeld(hold_id=hold_id, amount_inr_nano=amount):
                totals["escrow" if is_slice(hold_id) else "held"] += amount
            case HoldReleased(hold_id=hold_id, amount_inr_nano=amount):
                totals["escrow" if is_slice(hold_id) else "held"] -= amount
            case RequestCompleted():
                if (why := self._misstated(event, head.recorded_at_us)) is not None:
                    raise Mismatch(number, head.position, f"request {event.request_id}: {why}")
                totals["charged"] += event.charged_inr_nano
                totals["held"] -= event.drawn_inr_nano - event.drawn_from_slices_inr_nano
                totals["escrow"] -= event.drawn_from_slices_inr_nano
                totals["requests"] += 1
                totals["recomputed"] += event.priced is not None

    def _misstated(self, event: RequestCompleted, recorded_at_us: int) -> str | None:
        """Its cost against its own fields, then its prices against those published, if given."""
        if (why := charges.misstated(event)) is not None or self.prices is None:
            return why
        return self.prices.misprices(event, recorded_at_us)

    def _check_signature(self, checkpoint: Published) -> None:
        where = f"checkpoint at position {checkpoint.position}"
        try:
            root = signing.root(bytes.fromhex(leaf) for leaf in checkpoint.leaves).hex()
        except ValueError:
            raise Mismatch(0, None, f"{where}: a leaf is not hex") from None
        if root != checkpoint.root:  # so the root, compared below, is hex too
            raise Mismatch(0, None, f"{where}: its root is not the hash of its leaves")
        if not checkpoint.signature:
            if self.trusted is not None:
                raise Mismatch(0, None, f"{where} is not signed")
            self.unsigned += 1
            return
        if signing.key_id(_base64(checkpoint.public_key)) != checkpoint.key_id or not signing.verify(
                checkpoint.public_key, checkpoint.signature, signing.message(checkpoint.upto,
                                                                             bytes.fromhex(checkpoint.root))):
            raise Mismatch(0, None, f"{where}: its signature does not verify")
        if self.trusted is not None and checkpoint.key_id not in self.trusted:
            raise Mismatch(0, None, f"{where} is signed by key {checkpoint.key_id}, not a key you trust")
        self.keys.add(checkpoint.key_id)

    def _at_checkpoint(self, number: int, checkpoint: Published) -> None:
        """The stream's head at `checkpoint` is the last line read: its leaf must be there."""
        last = self.last
        if last is None:  # the stream began after it, or the export starts after it: nothing to hold
            return
        if signing.leaf(self.stream_id, last.version, last.hash).hex() not in set(checkpoint.leaves):
            raise Mismatch(number, last.position, f"the checkpoint at position {checkpoint.position} (up to"
                           f" {checkpoint.upto}) signed another head of this stream than version {last.version}:"
                           " history was rewritten after it, events are missing, or the export predates it")
        self.matched += 1

    def _at_tree_head(self, number: int, tree_size: int) -> None:
        """The last line read is the stream's newest event in the tree of `tree_size`: a leaf of it."""
        if self.last is None or self.tree is None:  # the stream began after it: nothing to hold
            return
        try:
            self.tree.newest(self.last.position, self.last.hash, tree_size)
        except ProofMismatch as exc:
            raise Mismatch(number, self.last.position, str(exc)) from None

    def finish(self, lines: int) -> dict:
        """The totals, after the last line; the checkpoints after the export's last event hold its end."""
        while self.pending:
            self._at_checkpoint(lines, self.pending.pop(0))
        while self.tree_pending:
            self._at_tree_head(lines, self.tree_pending.pop(0))
        return self.report()

    def report(self) -> dict:
        totals, first, last = self.totals, self.first, self.last
        whole = first is not None and first.version == 1  # a balance needs the stream from its start
        return {"ok": True, "stream_id": self.stream_id,
                "events": last.version - first.version + 1 if last and first else 0,
                "first_version": first and first.version, "last_version": last and last.version,
                "first_position": first and first.position, "last_position": last and last.position,
                "credits_inr": _inr(totals["credits"]), "charges_inr": _inr(totals["charged"]),
                "balance_inr": _inr(totals["credits"] - totals["charged"]) if whole else None,
                "held_inr": _inr(totals["held"]) if whole else None,
                "escrow_inr": _inr(totals["escrow"]) if whole else None, "requests": totals["requests"],
                "charges_recomputed": totals["recomputed"], "checkpoints_matched": self.matched,
                "checkpoints_unsigned": self.unsigned + (self.tree.unsigned if self.tree else 0),
                "signing_keys": sorted(self.keys | (self.tree.signers if self.tree else set())),
                "tree_heads": len(self.tree.heads) if self.tree else 0,
                "tree_heads_included": self.tree.included if self.tree else 0,
                "consistency_proofs": self.tree.chained if self.tree else 0,
                "prices_checked": self.prices.checked if self.prices else None}


def _missing(first: int, last: int) -> str:
    return f"version {first} is missing" if first == last else f"versions {first} to {last} are missing"


def _inr(nano: int) -> str:
    return format_amount(from_nano(nano))


def _base64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:
        return b""


def check(lines: Iterable[bytes], published: Iterable[Published] = (), trusted: frozenset[str] | None = None,
          partial: bool = False, prices: PricesDir | None = None, tree: TreeCheck | None = None) -> dict:
    """The report of an export's lines (Mismatch at the first that is wrong); a `partial` one may
    begin after the stream's first event; `prices`, the published price versions, if given; `tree`,
    the tree heads and their proofs."""
    checker, number = Checker(published, trusted, partial, prices, tree), 0
    for number, raw in enumerate(lines, start=1):
        checker.feed(number, raw)
    return checker.finish(number)


def check_file(path: str, checkpoints: str | None = None, public_keys: Sequence[str] = (), partial: bool = False,
               prices: str | None = None, proofs: str | None = None) -> dict:
    """`check` of an export file, against a file of published checkpoints with the operator's
    proofs and the PEM public keys at `public_keys` (trusted: a checkpoint signed by another key is
    a mismatch), if given."""
    trusted = frozenset(signing.key_id(signing.public_raw(Path(key).read_bytes())) for key in public_keys) or None
    published, tree = [], None
    if checkpoints is not None:
        listed = msgspec.json.decode(Path(checkpoints).read_bytes(), type=PublishedCheckpoints)
        given = msgspec.json.decode(Path(proofs).read_bytes(), type=Proofs) if proofs else None
        published = listed.legacy()
        try:
            tree = TreeCheck(listed.tree_heads(), listed.keys(), given, trusted)
        except ProofMismatch as exc:
            raise Mismatch(0, None, str(exc)) from None
    with open(path, "rb") as file:
        return check(file, published, trusted, partial, PricesDir(prices) if prices else None, tree)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The check's arguments, as `gateway ledger check-export` and `python -m ledger.export_check` take them."""
    parser.add_argument("file", help="an export: GET /v1/ledger/events or gateway ledger export")
    parser.add_argument("--checkpoints", metavar="FILE", help="the JSON of GET /v1/ledger/checkpoints")
    parser.add_argument("--proofs", metavar="FILE", help="the operator's proofs of the tree heads"
                                                          " (gateway ledger fetch-proofs)")
    parser.add_argument("--public-key", action="append", default=[], metavar="PEM",
                        help="trust only checkpoints signed by this key (GET /v1/ledger/public-key); repeatable")
    parser.add_argument("--prices", metavar="DIR", help="the published price versions: one {version}.json each,"
                                                        " as GET /v1/prices/{version} returns it")
    parser.add_argument("--partial", action="store_true",
                        help="the export may begin after the stream's first event (no balance then)")


def run(args: argparse.Namespace) -> int:
    """Exit 0 when the export is consistent (report on stdout), 1 with the first mismatch on stderr."""
    try:
        report = check_file(args.file, args.checkpoints, args.public_key, args.partial, args.prices, args.proofs)
    except (Mismatch, OSError, msgspec.DecodeError, signing.SigningKeyError) as exc:
        print(f"check-export: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(report))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ledger.export_check", description=__doc__.split("\n")[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
