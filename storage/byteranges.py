"""Framing of a `multipart/byteranges` body (RFC 9110 §14.6), computed before any byte is sent.

The body is: for each range, a delimiter line, the part's Content-Type and Content-Range
headers, an empty line, and the range's bytes; then the closing delimiter. Everything but the
bytes is known up front, so the total Content-Length is too.
"""

import secrets

import msgspec


class Part(msgspec.Struct, frozen=True):
    """One part: the framing sent before its bytes, and the inclusive range it carries."""

    head: bytes
    first: int
    last: int


class Layout(msgspec.Struct, frozen=True):
    """A whole multipart/byteranges body: its parts, closing delimiter and total length."""

    content_type: str
    parts: tuple[Part, ...]
    tail: bytes
    length: int


def content_range(first: int, last: int, size: int) -> str:
    """The Content-Range value for bytes [first, last] of `size`."""
    return f"bytes {first}-{last}/{size}"


def layout(ranges: tuple[tuple[int, int], ...], size: int, content_type: str,
           boundary: str | None = None) -> Layout:
    """Lay out the multipart body carrying `ranges` of an object of `size` bytes.

    The boundary is random (so it cannot be predicted, and is vanishingly unlikely to occur
    in the data) unless given.
    """
    boundary = boundary or secrets.token_hex(16)
    parts = tuple(
        Part(head=_part_head(boundary, index, content_type, content_range(first, last, size)),
             first=first, last=last)
        for index, (first, last) in enumerate(ranges))
    tail = f"\r\n--{boundary}--\r\n".encode("ascii")
    length = sum(len(part.head) + part.last - part.first + 1 for part in parts) + len(tail)
    return Layout(content_type=f"multipart/byteranges; boundary={boundary}", parts=parts,
                  tail=tail, length=length)


def _part_head(boundary: str, index: int, content_type: str, content_range_value: str) -> bytes:
    """Delimiter and headers of a part; parts after the first start with the CRLF that ends
    the previous part's bytes (it belongs to the delimiter, not to the data)."""
    lead = "\r\n" if index else ""
    return (f"{lead}--{boundary}\r\nContent-Type: {content_type}\r\n"
            f"Content-Range: {content_range_value}\r\n\r\n").encode("latin-1")
