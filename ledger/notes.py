"""Checkpoints as C2SP signed notes (c2sp.org/signed-note, c2sp.org/tlog-checkpoint), so any tool
that verifies Go's `sumdb/note` or a transparency log's checkpoint verifies ours.

A checkpoint's text is its origin line, the tree size, the root hash in standard base64, then
extension lines (ours: the time it was recorded), each ending in a newline. The note is that text,
a blank line, and one signature line per key: an em dash, the key's name (the origin), and base64
of the key's 4-byte hash and its Ed25519 signature over the text. The key hash is the first 4
bytes of SHA-256 over the name, a newline, the algorithm byte 0x01 and the 32-byte public key.
"""

import base64
import binascii
import hashlib
from typing import NamedTuple

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

ED25519 = b"\x01"
DASH = "\u2014 "


class NoteError(ValueError):
    """A note that is not a checkpoint signed by the key it is checked against."""


class Checkpoint(NamedTuple):
    """A checkpoint's text, read."""

    origin: str
    size: int
    root: bytes
    extensions: tuple[str, ...]


def key_hash(name: str, public_raw: bytes) -> bytes:
    return hashlib.sha256(name.encode() + b"\n" + ED25519 + public_raw).digest()[:4]


def verifier_key(name: str, public_raw: bytes) -> str:
    """The key as note verifiers name it: name+hash(hex)+base64(0x01 || public key)."""
    return f"{name}+{key_hash(name, public_raw).hex()}+{base64.b64encode(ED25519 + public_raw).decode()}"


def text(origin: str, size: int, root: bytes, extensions: tuple[str, ...] = ()) -> str:
    """A checkpoint's signed text."""
    if not origin or any(c.isspace() or c == "+" for c in origin):
        raise NoteError(f"origin {origin!r} must be non-empty, without spaces or '+'")
    return f"{origin}\n{size}\n{base64.b64encode(root).decode()}\n" + "".join(f"{line}\n" for line in extensions)


def signed(body: str, name: str, public_raw: bytes, signature: bytes) -> str:
    """The note: `body`, a blank line and the signature line of key `name`."""
    stamp = base64.b64encode(key_hash(name, public_raw) + signature).decode()
    return f"{body}\n{DASH}{name} {stamp}\n"


def opened(note: str, name: str, public_raw: bytes) -> Checkpoint:
    """The checkpoint a note signed by key (`name`, `public_raw`) states; NoteError otherwise."""
    body, _, signatures = note.rpartition("\n\n")
    body += "\n"
    if not signatures.endswith("\n") or not body.strip():
        raise NoteError("not a signed note: no blank line before its signatures")
    for line in signatures[:-1].split("\n"):
        if line.startswith(DASH) and _signs(line[len(DASH):], body, name, public_raw):
            return parse(body)
    raise NoteError(f"the note bears no valid signature of key {name!r}")


def _signs(line: str, body: str, name: str, public_raw: bytes) -> bool:
    signer, _, stamp = line.partition(" ")
    try:
        raw = base64.b64decode(stamp, validate=True)
    except binascii.Error:
        return False
    if signer != name or raw[:4] != key_hash(name, public_raw) or len(raw) != 68:
        return False
    try:
        Ed25519PublicKey.from_public_bytes(public_raw).verify(raw[4:], body.encode())
    except (InvalidSignature, ValueError):
        return False
    return True


def parse(body: str) -> Checkpoint:
    """A checkpoint's text read: origin, size, root and extension lines; NoteError otherwise."""
    lines = body.split("\n")
    if len(lines) < 4 or lines[-1] != "" or any(not line for line in lines[:-1]):
        raise NoteError("a checkpoint is an origin, a size and a root hash, each on a line of its own")
    origin, size, root = lines[0], lines[1], lines[2]
    if not size.isascii() or not size.isdigit() or (size.startswith("0") and size != "0"):
        raise NoteError(f"checkpoint size {size!r} is not a decimal number")
    try:
        digest = base64.b64decode(root, validate=True)
    except binascii.Error:
        raise NoteError("checkpoint root is not base64") from None
    if len(digest) != 32:
        raise NoteError("checkpoint root is not a SHA-256 hash")
    return Checkpoint(origin, int(size), digest, tuple(lines[3:-1]))
