"""API keys: random, recognisable, shown once, stored only as a SHA-256 digest."""

import hashlib
import secrets

KEY_PREFIX = "gwk_"


def new_key() -> str:
    """A fresh key: the prefix and 32 random bytes, URL-safe."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


def digest(key: str) -> str:
    """What the ledger stores in place of the key."""
    return hashlib.sha256(key.encode()).hexdigest()


def display_prefix(key: str) -> str:
    """Enough of a key to tell keys apart in a list, too little to use."""
    return key[:len(KEY_PREFIX) + 6]


def new_id(kind: str) -> str:
    """An identifier such as org_3f2a..., key_..., req_..."""
    return f"{kind}_{secrets.token_hex(12)}"
