"""In-prompt directives: ``[sim:NAME]`` or ``[sim:NAME=VALUE]`` markers anywhere in message text.

Grammar (several markers allowed; for a repeated NAME the last one wins)::

    directive := "[sim:" NAME [ "=" VALUE ] "]"
    NAME      := one of [a-z_], then any of [a-z0-9_]   (e.g. cache_write_1h)
    VALUE     := zero or more characters other than "]"

Each route family knows its own names and values (`Directives` for chat,
`MusicDirectives` for music); an unknown NAME (including one that only another
route knows), a VALUE of the wrong type, or a ``[sim:`` that does not start a
well-formed marker is an error, because a silently ignored typo would make a
test pass for the wrong reason.
Text without the substring ``[sim:`` is never regex-scanned, so directive-free
traffic pays one substring search per text piece.
"""

import re
from collections.abc import Iterable
from typing import Annotated, Literal, TypeVar

import msgspec

from simulator.hostile import HostileDirectives

MARKER = "[sim:"
_DIRECTIVE = re.compile(r"\[sim:([a-z_][a-z0-9_]*)(?:=([^\]]*))?\]")

NonNegative = Annotated[int, msgspec.Meta(ge=0)]
ErrorStatus = Annotated[int, msgspec.Meta(ge=400, le=599)]


class DirectiveError(ValueError):
    """A ``[sim:...]`` marker with an unknown name or an invalid value."""


class Directives(HostileDirectives, frozen=True, forbid_unknown_fields=True):
    """Per-request overrides; None / False means "not given".

    usage, malformed, bad_chunk, no_end: a hostile provider's faults (`simulator.hostile`).

    status: answer with this HTTP error status (400-599) and an error body.
    latency_ms: wait this long before sending response headers.
    tps: tokens per second for this request (0 = no pacing).
    tokens: number of completion tokens.
    hang: never answer; wait until the client goes away.
    hang_after: (stream) send the role chunk and K token chunks, then go silent.
    drop_after: (stream) send the role chunk and K token chunks, then abort the
        TCP connection; (non-stream) abort without any response.
    cache_read: report this many of the prompt tokens as read from the prompt cache.
    chunk_bytes: (OpenAI chat and completions streams, Gemini chat) each token delta is this many bytes
        (its token repeated), so a stream of hundreds of megabytes takes seconds; the usage
        reported still counts one token a delta.
    """

    status: ErrorStatus | None = None
    latency_ms: NonNegative | None = None
    tps: Annotated[float, msgspec.Meta(ge=0)] | None = None
    tokens: NonNegative | None = None
    hang: bool = False
    hang_after: NonNegative | None = None
    drop_after: NonNegative | None = None
    cache_read: NonNegative | None = None
    chunk_bytes: Annotated[int, msgspec.Meta(ge=1)] | None = None


class MusicDirectives(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Per-request overrides of a music generation; None / False means "not given".

    status, latency_ms, hang: as in `Directives`.
    drop_after: abort the TCP connection without any response (the value is ignored:
        a music answer is one JSON body, it cannot be cut after K pieces).
    block: answer with a safety refusal: "prompt" (200, promptFeedback.blockReason and
        no candidates), "candidate" (200, a candidate stopped for SAFETY without audio)
        or "400" (HTTP 400 saying the prompt was blocked).
    no_audio: a normal answer whose candidate has only the text part.
    """

    status: ErrorStatus | None = None
    latency_ms: NonNegative | None = None
    hang: bool = False
    drop_after: NonNegative | None = None
    block: Literal["prompt", "candidate", "400"] | None = None
    no_audio: bool = False


NO_DIRECTIVES = Directives()
NO_MUSIC_DIRECTIVES = MusicDirectives()

Schema = TypeVar("Schema", bound=msgspec.Struct)


def parse_as(texts: Iterable[str], empty: Schema) -> Schema:
    """The directives of all `texts` read into the schema of `empty` (a route's own Struct of
    knobs, `empty` when none is given); raises DirectiveError on a bad marker."""
    return _convert(_collect(texts), empty)


def parse_directives(texts: Iterable[str]) -> Directives:
    """Collect the chat directives of all `texts`; raises DirectiveError on a bad marker."""
    return parse_as(texts, NO_DIRECTIVES)


def parse_music_directives(texts: Iterable[str]) -> MusicDirectives:
    """Collect the music directives of all `texts`; raises DirectiveError on a bad marker."""
    return parse_as(texts, NO_MUSIC_DIRECTIVES)


def strip_markers(text: str) -> str:
    """`text` without its well-formed directive markers."""
    return _DIRECTIVE.sub("", text) if MARKER in text else text


def _collect(texts: Iterable[str]) -> dict[str, str | bool]:
    """NAME -> VALUE over all `texts`, the last marker of a NAME winning."""
    raw: dict[str, str | bool] = {}
    for text in texts:
        if MARKER in text:  # the cheap test keeps directive-free traffic off the regex
            raw.update(_markers(text))
    return raw


def _convert(raw: dict[str, str | bool], empty: Schema) -> Schema:
    """`raw` as the schema of `empty`; `empty` itself when no directive was given."""
    if not raw:
        return empty
    try:
        # strict=False lets msgspec coerce the textual values ("429") to the field types.
        return msgspec.convert(raw, type(empty), strict=False)
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
