"""In-prompt directives: ``[sim:NAME]`` or ``[sim:NAME=VALUE]`` markers anywhere in message text.

Grammar (several markers allowed; for a repeated NAME the last one wins)::

    directive := "[sim:" NAME [ "=" VALUE ] "]"
    NAME      := one or more of [a-z_]
    VALUE     := zero or more characters other than "]"

Known names and their values (see `Directives`); an unknown NAME, a VALUE of the
wrong type, or a ``[sim:`` that does not start a well-formed marker is an error,
because a silently ignored typo would make a test pass for the wrong reason.
Text without the substring ``[sim:`` is never regex-scanned, so directive-free
traffic pays one substring search per text piece.
"""

import re
from collections.abc import Iterable
from typing import Annotated

import msgspec

MARKER = "[sim:"
_DIRECTIVE = re.compile(r"\[sim:([a-z_]+)(?:=([^\]]*))?\]")

NonNegative = Annotated[int, msgspec.Meta(ge=0)]


class DirectiveError(ValueError):
    """A ``[sim:...]`` marker with an unknown name or an invalid value."""


class Directives(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Per-request overrides; None / False means "not given".

    status: answer with this HTTP error status (400-599) and an error body.
    latency_ms: wait this long before sending response headers.
    tps: tokens per second for this request (0 = no pacing).
    tokens: number of completion tokens.
    hang: never answer; wait until the client goes away.
    hang_after: (stream) send the role chunk and K token chunks, then go silent.
    drop_after: (stream) send the role chunk and K token chunks, then abort the
        TCP connection; (non-stream) abort without any response.
    """

    status: Annotated[int, msgspec.Meta(ge=400, le=599)] | None = None
    latency_ms: NonNegative | None = None
    tps: Annotated[float, msgspec.Meta(ge=0)] | None = None
    tokens: NonNegative | None = None
    hang: bool = False
    hang_after: NonNegative | None = None
    drop_after: NonNegative | None = None


NO_DIRECTIVES = Directives()


def parse_directives(texts: Iterable[str]) -> Directives:
    """Collect the directives of all `texts`; raises DirectiveError on a bad marker."""
    raw: dict[str, str | bool] = {}
    for text in texts:
        if MARKER in text:  # the cheap test keeps directive-free traffic off the regex
            raw.update(_markers(text))
    if not raw:
        return NO_DIRECTIVES
    try:
        # strict=False lets msgspec coerce the textual values ("429") to the field types.
        return msgspec.convert(raw, Directives, strict=False)
    except msgspec.ValidationError as exc:
        raise DirectiveError(f"invalid simulator directive: {exc}") from exc


def _markers(text: str) -> dict[str, str | bool]:
    """NAME -> VALUE for every marker in `text`; a marker without VALUE maps to True.

    Every ``[sim:`` must start a well-formed marker, so ``[sim:tokens 5]`` is an error.
    """
    matches = list(_DIRECTIVE.finditer(text))
    if len(matches) != text.count(MARKER):
        raise DirectiveError(
            "malformed simulator directive: every '[sim:' must start [sim:NAME] or [sim:NAME=VALUE]"
        )
    markers: dict[str, str | bool] = {}
    for match in matches:
        name, value = match.group(1, 2)
        markers[name] = True if value is None else value
    return markers
