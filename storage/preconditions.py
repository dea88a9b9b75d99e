"""ETag comparisons for conditional requests (RFC 9110 §8.8.3, §13.1.2, §13.1.5)."""

import re

# An entity-tag: optional weakness marker, then an opaque tag in double quotes. The tag may
# contain commas, so a list of entity-tags cannot simply be split on ",".
_ENTITY_TAG = re.compile(r'(W/)?("[\x21\x23-\x7e\x80-\xff]*")')


def _opaque(etag: str) -> str:
    """The quoted opaque tag of an entity-tag, without any W/ prefix."""
    return etag[2:] if etag.startswith("W/") else etag


def none_match(if_none_match: str | None, etag: str) -> bool:
    """Whether an If-None-Match header matches `etag` (so a GET/HEAD gets 304).

    `*` matches any existing representation. Comparison is weak, as RFC 9110 §13.1.2
    requires: W/"x" matches "x".
    """
    if if_none_match is None:
        return False
    if if_none_match.strip() == "*":
        return True
    wanted = _opaque(etag)
    return any(tag == wanted for _, tag in _ENTITY_TAG.findall(if_none_match))


def if_range_allows(if_range: str | None, etag: str) -> bool:
    """Whether a Range may be honoured given the If-Range header (RFC 9110 §13.1.5).

    Absent If-Range: yes. Otherwise only when it equals our ETag exactly under strong
    comparison: a weak entity-tag (ours or theirs) never matches. An HTTP-date never matches
    either: we send no Last-Modified, so a client cannot hold a date validator from us, and
    a date is a weak validator anyway; the client then gets the whole, current object.
    """
    if if_range is None:
        return True
    candidate = if_range.strip()
    return not etag.startswith("W/") and not candidate.startswith("W/") and candidate == etag
