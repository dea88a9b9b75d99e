"""Helpers shared by the storage tests (import as `from storage_helpers import ...`)."""

import hashlib
import random

from tests.support import S3_CREDENTIALS as CREDENTIALS  # noqa: F401  (re-exported)


def payload(size: int, seed: int = 7) -> bytes:
    """`size` reproducible pseudo-random bytes (every byte value occurs, so offsets matter)."""
    return random.Random(seed).randbytes(size)


def md5_etag(body: bytes) -> str:
    """The ETag S3 gives an object stored with a single PUT: its quoted MD5."""
    return f'"{hashlib.md5(body).hexdigest()}"'
