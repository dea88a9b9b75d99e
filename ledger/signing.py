"""Signed checkpoints: the gateway's Ed25519 signature over one root of every stream's head.

A checkpoint (ledger.checkpoints) names each stream's head at a position of the log. Its root is
SHA-256 over the sorted leaves, a leaf being SHA-256 of one head (stream id, version, chain hash):
what is published is the leaves and the root, so no stream's name or size shows, yet a customer
holding their own stream's export can compute its leaf and find it there. The signature covers
the position and the root; the public key travels with it (and its id, a fingerprint), so a
checkpoint signed before a key was rotated still verifies with the key that signed it. Whether
that key is the operator's is what a customer checks against the published one.
"""

import base64
import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

Head = tuple[int, bytes]  # (version, chain hash), as ledger.chains has it
DOMAIN = b"gateway-ledger-checkpoint/v1\n"  # so no other signed message can pass for a checkpoint


class SigningKeyError(ValueError):
    """A signing key that cannot be used: not an Ed25519 private key in PEM."""


def leaf(stream_id: str, version: int, chain_hash: bytes) -> bytes:
    """What a checkpoint publishes of one stream's head."""
    return hashlib.sha256(f"{stream_id}\n{version}\n".encode() + chain_hash).digest()


def root(leaves: Iterable[bytes]) -> bytes:
    """One hash over every stream's leaf, in sorted order."""
    return hashlib.sha256(b"".join(sorted(leaves))).digest()


def message(upto: int, root_hash: bytes) -> bytes:
    """What is signed: the checkpoint's last position and its root."""
    return DOMAIN + f"{upto}\n".encode() + root_hash.hex().encode()


def key_id(public_raw: bytes) -> str:
    """A public key's fingerprint: the first 16 hex digits of SHA-256 of its 32 bytes."""
    return hashlib.sha256(public_raw).hexdigest()[:16]


def public_raw(pem: bytes) -> bytes:
    """The 32 bytes of an Ed25519 public key given in PEM; SigningKeyError otherwise."""
    try:
        key = serialization.load_pem_public_key(pem)
    except ValueError as exc:
        raise SigningKeyError(f"not a PEM public key: {exc}") from None
    if not isinstance(key, Ed25519PublicKey):
        raise SigningKeyError("not an Ed25519 public key")
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def public_pem(raw: bytes) -> str:
    key = Ed25519PublicKey.from_public_bytes(raw)
    return key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()


def verify(public_b64: str, signature_b64: str, signed: bytes) -> bool:
    """Whether `signature_b64` is the signature of `signed` by the key `public_b64` (base64 raw)."""
    try:
        key = Ed25519PublicKey.from_public_bytes(base64.b64decode(public_b64, validate=True))
        key.verify(base64.b64decode(signature_b64, validate=True), signed)
    except (InvalidSignature, ValueError):
        return False
    return True


class Signer:
    """One private key, loaded once."""

    def __init__(self, private: Ed25519PrivateKey) -> None:
        self._private = private
        self.public_raw = private.public_key().public_bytes(serialization.Encoding.Raw,
                                                            serialization.PublicFormat.Raw)
        self.key_id = key_id(self.public_raw)
        self.public_b64 = base64.b64encode(self.public_raw).decode()
        self.public_pem = public_pem(self.public_raw)

    @classmethod
    def from_pem(cls, pem: bytes) -> "Signer":
        try:
            private = serialization.load_pem_private_key(pem, password=None)
        except (ValueError, TypeError) as exc:
            raise SigningKeyError(f"not an unencrypted PEM private key: {exc}") from None
        if not isinstance(private, Ed25519PrivateKey):
            raise SigningKeyError("not an Ed25519 private key")
        return cls(private)

    @classmethod
    def configured(cls, setting: str) -> "Signer | None":
        """The key a setting names: PEM text itself (as `env:NAME` gives it) or a file's path;
        None when empty (checkpoints go unsigned)."""
        if not setting.strip():
            return None
        if setting.lstrip().startswith("-----BEGIN"):
            return cls.from_pem(setting.encode())
        try:
            return cls.from_pem(Path(setting).read_bytes())
        except OSError as exc:
            raise SigningKeyError(f"cannot read the signing key {setting!r}: {exc.strerror}") from None

    @classmethod
    def generate(cls) -> "Signer":
        return cls(Ed25519PrivateKey.generate())

    @classmethod
    def written_to(cls, path: str | Path) -> "Signer":
        """A new key, written to `path` (PEM, readable by its owner alone); never over a file there."""
        signer = cls.generate()
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as out:
            out.write(signer.private_pem())
        return signer

    def private_pem(self) -> bytes:
        return self._private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption())

    def sign(self, signed: bytes) -> str:
        """The signature of `signed`, base64."""
        return base64.b64encode(self._private.sign(signed)).decode()
