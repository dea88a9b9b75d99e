"""Helpers shared by the storage tests (import as `from storage_helpers import ...`)."""

import hashlib
import random

# Dummy credentials handed to the client explicitly, so nothing reads the environment or ~/.aws.
CREDENTIALS = {"region": "us-east-1", "access_key_id": "testing-access-key-id",
               "secret_access_key": "testing-secret-access-key"}


def payload(size: int, seed: int = 7) -> bytes:
    """`size` reproducible pseudo-random bytes (every byte value occurs, so offsets matter)."""
    return random.Random(seed).randbytes(size)


def md5_etag(body: bytes) -> str:
    """The ETag S3 gives an object stored with a single PUT: its quoted MD5."""
    return f'"{hashlib.md5(body).hexdigest()}"'
