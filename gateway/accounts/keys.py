"""API keys: random, recognisable, shown once, stored only as a SHA-256 digest."""

import hashlib
import secrets
import time

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
    """An identifier such as org_3f2a..., key_..., req_...: 12 hex digits of the Unix time in
    milliseconds, then 12 random ones (48 bits a millisecond: collisions are out of reach).
    Time-ordered, so the ledger's indexes on ids take new rows at their right edge instead of
    on a random page each (random ids doubled the pages a SQLite commit writes)."""
    return f"{kind}_{time.time_ns() // 1_000_000:012x}{secrets.token_hex(6)}"
