"""Embedding vectors as OpenAI's base64 form: the little-endian float32 bytes, base64-encoded."""

import base64
import binascii
import struct


def rounded(values: list[float]) -> list[float]:
    """`values` rounded to float32 each, so the float and base64 forms of a vector agree."""
    return list(struct.unpack(f"<{len(values)}f", struct.pack(f"<{len(values)}f", *values)))


def encode(values: list[float]) -> str:
    return base64.b64encode(struct.pack(f"<{len(values)}f", *values)).decode()


def decode(text: str) -> list[float]:
    """The vector of a base64 string; ValueError when it is not whole float32 values."""
    try:
        raw = base64.b64decode(text, validate=True)
    except binascii.Error as exc:
        raise ValueError(f"not base64: {exc}") from None
    if len(raw) % 4:
        raise ValueError(f"{len(raw)} bytes are not whole float32 values")
    return list(struct.unpack(f"<{len(raw) // 4}f", raw))
