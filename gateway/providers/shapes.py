"""The shape of what providers answer: the fields the gateway reads, with their types.

An upstream body or stream event is checked against its shape before anything reads it, so a
provider that sends `"choices": "..."` or a text that is a number is a 502 the gateway records,
never a crash. Unknown fields are allowed (and kept, since the checked dict is what is used);
usage objects are only required to be objects here: their counts are checked by
`gateway.providers.usage`.
"""

from typing import Any, TypeVar

import msgspec

from gateway.edge.errors import UpstreamError

Shape = TypeVar("Shape", bound=msgspec.Struct)


def conforming(provider: str, value: object, shape: type[Shape], what: str) -> Shape:
    """`value` read as `shape`; UpstreamError 502 naming the provider and the field otherwise."""
    try:
        return msgspec.convert(value, shape)
    except msgspec.ValidationError as exc:
        raise UpstreamError(502, f"{provider} sent a malformed {what}: {exc}") from None


# -- OpenAI -----------------------------------------------------------------------------------

class OpenAIMessage(msgspec.Struct):
    content: str | None = None
    tool_calls: list[dict[str, Any]] | None = None


class OpenAIChoice(msgspec.Struct):
    message: OpenAIMessage


class OpenAICompletion(msgspec.Struct):
    choices: list[OpenAIChoice]
    usage: dict[str, Any] | None = None


class OpenAIDelta(msgspec.Struct):
    content: str | None = None
    tool_calls: list[dict[str, Any]] | None = None


class OpenAIChunkChoice(msgspec.Struct):
    delta: OpenAIDelta | None = None


class OpenAIChunk(msgspec.Struct):
    choices: list[OpenAIChunkChoice] | None = None
    usage: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class OpenAITextChoice(msgspec.Struct):
    text: str = ""


class OpenAITextCompletion(msgspec.Struct):
    """A legacy text completion (POST /v1/completions)."""

    choices: list[OpenAITextChoice]
    usage: dict[str, Any] | None = None


class OpenAITextChunk(msgspec.Struct):
    choices: list[OpenAITextChoice] | None = None
    usage: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class OpenAITranscription(msgspec.Struct):
    text: str = ""
    usage: dict[str, Any] | None = None
    segments: list[dict[str, Any]] | None = None


# -- Anthropic --------------------------------------------------------------------------------

class AnthropicBlock(msgspec.Struct):
    type: str
    text: str | None = None
    id: str | None = None
    name: str | None = None
    input: dict[str, Any] | None = None


class AnthropicMessage(msgspec.Struct):
    content: list[AnthropicBlock]
    usage: dict[str, Any] | None = None
    id: str | None = None
    model: str | None = None
    stop_reason: str | None = None


class AnthropicStartMessage(msgspec.Struct):
    id: str | None = None
    model: str | None = None
    usage: dict[str, Any] | None = None


class AnthropicDelta(msgspec.Struct):
    type: str | None = None
    text: str | None = None
    partial_json: str | None = None
    thinking: str | None = None
    stop_reason: str | None = None


class AnthropicEvent(msgspec.Struct):
    """Any event of a Messages stream (message_start, content_block_*, message_delta, ...)."""

    type: str
    message: AnthropicStartMessage | None = None
    index: int | None = None
    content_block: AnthropicBlock | None = None
    delta: AnthropicDelta | None = None
    usage: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


# -- Gemini -----------------------------------------------------------------------------------

class GeminiFunctionCall(msgspec.Struct):
    name: str
    args: dict[str, Any] | None = None
    id: str | None = None


class GeminiInlineData(msgspec.Struct, rename="camel"):
    data: str = ""
    mime_type: str | None = None


class GeminiPart(msgspec.Struct, rename="camel"):
    text: str | None = None
    thought: bool | None = None
    function_call: GeminiFunctionCall | None = None
    inline_data: GeminiInlineData | None = None


class GeminiContent(msgspec.Struct):
    parts: list[GeminiPart] = []


class GeminiCandidate(msgspec.Struct, rename="camel"):
    index: int | None = None
    content: GeminiContent | None = None
    finish_reason: str | None = None


class GeminiFeedback(msgspec.Struct, rename="camel"):
    block_reason: str | None = None
    block_reason_message: str | None = None


class GeminiAnswer(msgspec.Struct, rename="camel"):
    """A GenerateContentResponse: a whole answer, or one event of a stream."""

    candidates: list[GeminiCandidate] | None = None
    usage_metadata: dict[str, Any] | None = None
    prompt_feedback: GeminiFeedback | None = None
