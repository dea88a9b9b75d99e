"""Price versions: the id of a published price list (a hash of its prices), and the check that a
charge's recorded prices are exactly those its version published for its tier at its time
(`gateway ledger check-export FILE --prices DIR`).
"""

import hashlib

import msgspec

_CANONICAL = msgspec.json.Encoder(order="sorted")


def version_of(prices: list[dict]) -> str:
    """A price list's version: the SHA-256 (hex, first 32 digits) of its canonical JSON (keys
    sorted, no spaces), so the same prices always make the same version, anywhere."""
    return hashlib.sha256(_CANONICAL.encode(prices)).hexdigest()[:32]
