"""Header values a provider sends that reach the client: parsed, then rendered anew, never copied.

A provider's value is untrusted text: copied as sent it could carry a line separator, a comma-joined
second header, or words where a number belongs. Each value is read to what it means and written back
in its one canonical form; a value that means nothing is dropped (or, where a value is needed,
replaced by the neutral one).
"""

import email.utils
import math
import re
import time
from datetime import UTC

MAX_RETRY_AFTER_S = 86_400  # a longer wait asked of the client is not believed, and not passed on
FALLBACK_CONTENT_TYPE = "application/octet-stream"

_SECONDS = re.compile(r"[0-9]{1,9}")  # ASCII digits only: str.isdigit() takes "²" and "١" too
_TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"  # RFC 9110 token
_MEDIA_TYPE = re.compile(rf"({_TOKEN})/({_TOKEN})")
_PARAMETER = re.compile(rf"({_TOKEN})=({_TOKEN})")


def retry_after(value: str | None, now: float | None = None) -> str | None:
    """A Retry-After as whole seconds from `now`: given as seconds or as an HTTP date (a past one is
    0); None when absent, unreadable or longer than MAX_RETRY_AFTER_S."""
    seconds = retry_after_seconds(value, time.time() if now is None else now)
    return None if seconds is None else str(seconds)


def retry_after_seconds(value: str | None, now: float) -> int | None:
    if not value:
        return None
    value = value.strip(" \t")
    if _SECONDS.fullmatch(value):
        seconds: int | None = int(value)
    else:
        seconds = _seconds_until(value, now)
    return seconds if seconds is not None and seconds <= MAX_RETRY_AFTER_S else None


def _seconds_until(date: str, now: float) -> int | None:
    """Whole seconds from `now` to an HTTP date (never negative); None when `date` is not one."""
    if not (date.isascii() and date.isprintable()):
        return None
    try:
        when = email.utils.parsedate_to_datetime(date)
        if when.tzinfo is None:  # "-0000": the zone is unknown, and HTTP dates are GMT
            when = when.replace(tzinfo=UTC)
        return max(0, math.ceil(when.timestamp() - now))
    except (TypeError, ValueError, OverflowError, IndexError):
        return None


def content_type(value: str | None) -> str:
    """A Content-Type as `type/subtype` and its `name=value` parameters, lower-cased but values;
    FALLBACK_CONTENT_TYPE when the media type is absent or unreadable. Parameters that are not a
    plain token pair (quoted, empty, anything else) are left out."""
    media, *parameters = (value or "").split(";")
    found = _MEDIA_TYPE.fullmatch(media.strip(" \t"))
    if not found:
        return FALLBACK_CONTENT_TYPE
    kept = [f"{m.group(1).lower()}={m.group(2)}" for p in parameters if (m := _PARAMETER.fullmatch(p.strip(" \t")))]
    return "; ".join([f"{found.group(1).lower()}/{found.group(2).lower()}", *kept])
