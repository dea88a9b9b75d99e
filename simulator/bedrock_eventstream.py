"""The encoder of AWS's binary event stream (``application/vnd.amazon.eventstream``).

Each message (all integers big-endian)::

    total length (4) | headers length (4) | CRC32 of those 8 bytes (4)
    headers: per header, name length (1) | name | type (1; 7 = string) | value length (2) | value
    payload
    CRC32 of everything before it (4)

Only string headers are written: every header Bedrock sends is one. The decoder on the other
side (tests, the gateway) is botocore's `EventStreamBuffer`, which checks both CRCs, so a frame
here that it accepts is a frame the real service could have sent.

Bedrock pads each event payload with a ``"p"`` field of random letters (so that the size of an
encrypted frame does not tell its content); `event` does the same.
"""

import random
import string
import struct
import zlib
from typing import Any

import orjson

CONTENT_TYPE = "application/vnd.amazon.eventstream"
STRING_HEADER = 7
PRELUDE = struct.Struct(">II")
CRC = struct.Struct(">I")
_PADDING = string.ascii_letters + string.digits


def encode_headers(headers: dict[str, str]) -> bytes:
    """The header block of `headers`, each a string header."""
    parts = []
    for name, value in headers.items():
        raw_name, raw_value = name.encode(), value.encode()
        parts.append(bytes([len(raw_name)]) + raw_name + bytes([STRING_HEADER])
                     + struct.pack(">H", len(raw_value)) + raw_value)
    return b"".join(parts)


def encode_message(headers: dict[str, str], payload: bytes) -> bytes:
    """One complete message: prelude, prelude CRC, headers, payload, message CRC."""
    header_block = encode_headers(headers)
    total = PRELUDE.size + CRC.size + len(header_block) + len(payload) + CRC.size
    prelude = PRELUDE.pack(total, len(header_block))
    head = prelude + CRC.pack(zlib.crc32(prelude)) + header_block + payload
    return head + CRC.pack(zlib.crc32(head))


def padding() -> str:
    """Random letters of a random length, as Bedrock puts in each event's ``"p"``."""
    return "".join(random.choices(_PADDING, k=random.randint(1, 40)))


def event(event_type: str, payload: dict[str, Any], *, pad: bool = True) -> bytes:
    """An event message: ``:event-type`` `event_type`, JSON `payload` (padded unless `pad` is off)."""
    body = {**payload, "p": padding()} if pad else payload
    headers = {":event-type": event_type, ":content-type": "application/json", ":message-type": "event"}
    return encode_message(headers, orjson.dumps(body))


def exception(exception_type: str, message: str) -> bytes:
    """An exception message, as Bedrock sends when a stream fails after it started; botocore
    raises it as an `EventStreamError` whose code is `exception_type` (e.g. throttlingException)."""
    headers = {":exception-type": exception_type, ":content-type": "application/json",
               ":message-type": "exception"}
    return encode_message(headers, orjson.dumps({"message": message}))
