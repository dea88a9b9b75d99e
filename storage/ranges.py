"""HTTP byte ranges (RFC 9110 §14): which bytes of a representation a request asks for.

Pure logic, no I/O. `choose` turns the Range and If-Range headers plus the object's size and
ETag into one of three answers: Full (send 200 with everything), Partial (send 206 with
these inclusive ranges), Unsatisfiable (send 416).
"""

import re

import msgspec

from storage.preconditions import if_range_allows

# More ranges than this and the Range header is ignored (a 200 with the whole object), which
# RFC 9110 §14.2 allows ("a server MAY ignore the Range header field"). Each range costs us an
# S3 GET and a multipart part, and many small or overlapping ranges are a known
# denial-of-service pattern (RFC 9110 §17.15); real clients ask for one or two.
MAX_RANGES = 5

# int-range "first-last" / "first-", or suffix-range "-length"; DIGIT is ASCII only.
_RANGE_SPEC = re.compile(r"([0-9]*)-([0-9]*)", re.ASCII)


class Full(msgspec.Struct, frozen=True, tag=True):
    """Serve the whole representation (200)."""


class Partial(msgspec.Struct, frozen=True, tag=True):
    """Serve these byte ranges (206); each is (first, last) inclusive, within the object."""

    ranges: tuple[tuple[int, int], ...]


class Unsatisfiable(msgspec.Struct, frozen=True, tag=True):
    """The ranges are valid but select nothing (416 with Content-Range: bytes */size)."""


RangeAnswer = Full | Partial | Unsatisfiable

# A syntactically valid range-spec before it meets the size: (first, last) with last None
# when open-ended, or (None, suffix_length).
_Spec = tuple[int | None, int | None]


def choose(range_header: str | None, if_range: str | None, size: int, etag: str) -> RangeAnswer:
    """The answer for a GET with these Range and If-Range headers on an object of `size`."""
    if range_header is None or not if_range_allows(if_range, etag):
        return Full()
    return parse(range_header, size)


def parse(range_header: str, size: int) -> RangeAnswer:
    """Evaluate a Range header against a representation of `size` bytes.

    An invalid header (unknown unit, bad syntax, last < first) is ignored, as RFC 9110 §14.2
    says: Full. So is one with more than MAX_RANGES ranges. Otherwise the satisfiable ranges,
    clamped to the object, in the order asked (overlaps allowed), or Unsatisfiable if none is.
    """
    specs = _specs(range_header)
    if specs is None or len(specs) > MAX_RANGES:
        return Full()
    if size == 0 and any(first is None and last for first, last in specs):
        # RFC 9110 §14.1.1: on an empty representation a non-zero suffix-range is the one
        # satisfiable form, yet no byte range can express it, so send the (empty) whole.
        return Full()
    ranges = tuple(r for r in (_resolve(spec, size) for spec in specs) if r is not None)
    return Partial(ranges) if ranges else Unsatisfiable()


def _specs(range_header: str) -> list[_Spec] | None:
    """The range-specs of a `bytes=` header, or None if the header is not valid."""
    unit, equals, range_set = range_header.partition("=")
    if not equals or unit.strip().lower() != "bytes":
        return None
    specs = []
    for element in range_set.split(","):
        if not element.strip():
            continue  # RFC 9110 §5.6.1: recipients ignore empty list elements
        spec = _spec(element.strip())
        if spec is None:
            return None
        specs.append(spec)
    return specs or None


def _spec(text: str) -> _Spec | None:
    """One range-spec ("0-9", "5-", "-3"), or None if it is not valid."""
    match = _RANGE_SPEC.fullmatch(text)
    if match is None or not (match[1] or match[2]):
        return None
    if not match[1]:
        return None, int(match[2])
    first, last = int(match[1]), int(match[2]) if match[2] else None
    if last is not None and last < first:
        return None
    return first, last


def _resolve(spec: _Spec, size: int) -> tuple[int, int] | None:
    """The inclusive byte range a valid spec selects in `size` bytes, or None if none."""
    first, last = spec
    if first is None:  # suffix-range: the final `last` bytes (all of them if fewer)
        length = min(last or 0, size)
        return (size - length, size - 1) if length else None
    if first >= size:
        return None
    return first, size - 1 if last is None else min(last, size - 1)
