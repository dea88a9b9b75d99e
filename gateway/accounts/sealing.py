"""Sealing organizations' own provider keys (BYOK) at rest, with AES-256-GCM.

The cipher key is derived from `[secrets] master_key` with HKDF; each sealed value is bound to
its organization and provider as associated data, so a sealed key copied to another row does not
open. Fingerprints are keyed too (HMAC), so the one stored in the event log reveals nothing that
would help guess the key.
"""

import hashlib
import hmac
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

VERSION = b"\x01"
NONCE_BYTES = 12


class SealingError(Exception):
    """A key cannot be sealed (no master key) or a sealed key does not open (another master key)."""


def _derive(master_key: str, purpose: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=purpose).derive(master_key.encode())


class Sealer:
    def __init__(self, master_key: str) -> None:
        self.enabled = bool(master_key)
        self._cipher = AESGCM(_derive(master_key, b"gateway provider keys v1")) if master_key else None
        self._mac_key = _derive(master_key, b"gateway provider key fingerprints v1") if master_key else b""

    def seal(self, org_id: str, provider: str, key: str) -> bytes:
        nonce = os.urandom(NONCE_BYTES)
        return VERSION + nonce + self._require().encrypt(nonce, key.encode(), _bound(org_id, provider))

    def open(self, org_id: str, provider: str, sealed: bytes) -> str:
        version, nonce, body = sealed[:1], sealed[1:1 + NONCE_BYTES], sealed[1 + NONCE_BYTES:]
        if version != VERSION:
            raise SealingError(f"the stored {provider} key of {org_id} has an unknown format")
        try:
            return self._require().decrypt(nonce, body, _bound(org_id, provider)).decode()
        except InvalidTag:
            raise SealingError(f"the stored {provider} key of {org_id} does not open with this"
                               " [secrets] master_key") from None

    def fingerprint(self, key: str) -> str:
        return "fp_" + hmac.new(self._require_mac(), key.encode(), hashlib.sha256).hexdigest()[:16]

    def _require(self) -> AESGCM:
        if self._cipher is None:
            raise SealingError("provider keys need [secrets] master_key (GATEWAY_SECRETS_MASTER_KEY)")
        return self._cipher

    def _require_mac(self) -> bytes:
        self._require()
        return self._mac_key


def _bound(org_id: str, provider: str) -> bytes:
    return f"{org_id}\n{provider}".encode()
