"""A hostile provider: the ways a broken upstream spoils an answer it sends with status 200.

These knobs exist to test the gateway's distrust of upstream answers: a usage it must not
bill (above all one that would credit an organization), a body or a stream chunk of the wrong
shape, a stream that is cut cleanly without its end marker. Each route applies them to its
own wire format; the shared parts (the directive fields, the bad values) live here.
"""

from types import MappingProxyType
from typing import Any, Literal

import msgspec

UsageFault = Literal["negative", "string", "huge", "float", "bool", "cached_over"]

# The prompt count each fault reports; "huge" is past any per-request bound, yet fits 64 bits.
FAULTY_COUNTS = MappingProxyType({"negative": -50_000_000, "string": "12", "huge": 10**15, "float": 12.5,
                                  "bool": True})
NOT_JSON = b"data: {not json\n\n"
MALFORMED = "malformed"  # what a malformed answer holds where an array or object belongs


class HostileDirectives(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The faults of a hostile provider (None / False: not given). The chat routes know them
    all; the media and realtime routes only the ones they honour (`simulator.openai_media`,
    `simulator.openai_realtime`), the music route none.

    usage: report a usage the gateway must refuse: "negative" (the prompt count is
        -50000000), "string" ("12"), "huge" (10**15), "float" (12.5), "bool" (true) or
        "cached_over" (more cached tokens than prompt tokens; on Anthropic, whose cache counts
        are apart from input_tokens, a negative input_tokens the cache read more than offsets;
        ignored where no cache is reported: embeddings, transcriptions).
        On transcriptions billed by the second, the fault is in the seconds reported, where
        "float" (12.5) is a sound duration: that answer is billed as usual.
    malformed: a 200 whose main field has the wrong type (chat `choices`, Anthropic `content`,
        Gemini `candidates`, embeddings `data` a string; a transcription's `text` a number);
        on a stream, one chunk so broken after the content.
    bad_chunk: (stream) one chunk that is not JSON after the content.
    no_end: (stream) end the stream cleanly without its end marker: no `[DONE]`
        (OpenAI), no message_stop (Anthropic), no finishReason (Gemini).
    overrun: generate (and bill) the tokens asked for past the client's output limit, as a
        provider that does not honour max_tokens would.
    """

    usage: UsageFault | None = None
    malformed: bool = False
    bad_chunk: bool = False
    no_end: bool = False
    overrun: bool = False


NO_FAULTS = HostileDirectives()


def spoiled_usage(usage: dict[str, Any], fault: UsageFault | None, prompt: str,
                  cached: tuple[str, ...] = ()) -> dict[str, Any]:
    """`usage` with `fault` in its `prompt` count, or, for "cached_over", with the count at
    the path `cached` set above it (no path: unchanged)."""
    if fault is None or (fault == "cached_over" and not cached):
        return usage
    if fault != "cached_over":
        return {**usage, prompt: FAULTY_COUNTS[fault]}
    counted = usage.get(prompt)
    over = (counted if isinstance(counted, int) else 0) + 10
    return _with(usage, cached, over)


def _with(value: dict[str, Any], path: tuple[str, ...], leaf: Any) -> dict[str, Any]:
    """A copy of `value` with `leaf` at `path` (objects created along the way)."""
    head, *rest = path
    inner = value.get(head)
    inner = inner if isinstance(inner, dict) else {}
    return {**value, head: _with(inner, tuple(rest), leaf) if rest else leaf}


def broken_frames(faults: HostileDirectives, malformed: bytes) -> list[bytes]:
    """The broken stream frames `faults` ask for (`malformed`: the route's own broken chunk)."""
    return ([malformed] if faults.malformed else []) + ([NOT_JSON] if faults.bad_chunk else [])
