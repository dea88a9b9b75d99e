"""Anthropic Messages wire format: request schema, message bodies, SSE events, errors.

Only the shapes live here; `anthropic_messages` decides what to send and when.

Like the real API, the request is validated strictly: `max_tokens` is required, an
unknown top-level field is refused, and every content block must be of a known type,
so a gateway that leaks OpenAI fields into an Anthropic request gets the 400 it would
get in production.

Token accounting (deterministic, so tests can predict it): the chat rule of
`simulator.textgen` applied to the system prompt (counted as one message when present)
and each message's text pieces (text blocks, plain text documents and the text of tool
results), plus its images and documents as Anthropic bills them (`prompt_tokens`). Of that
total, ``cache_read_input_tokens`` and ``cache_creation_input_tokens`` are what the
cache directives ask for (the latter both lifetimes' writes, split in ``cache_creation``, which
current API versions always send); ``input_tokens`` is the rest, as Anthropic reports it.
"""

import uuid
from types import MappingProxyType
from typing import Annotated, Any, Literal

import msgspec
import orjson
from aiohttp import web

from simulator.media_billing import anthropic_media_tokens
from simulator.textgen import count_prompt_tokens

NonNegative = Annotated[int, msgspec.Meta(ge=0)]

SSE_HEADERS = {"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache"}
ImageType = Literal["image/jpeg", "image/png", "image/gif", "image/webp"]

# The `error.type` Anthropic pairs with an HTTP status.
_ERROR_TYPES = MappingProxyType({
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
})  # fmt: skip


class BadRequest(ValueError):
    """A request the real API would reject with 400 invalid_request_error."""


class Base64Source(msgspec.Struct, tag="base64", tag_field="type"):
    media_type: ImageType
    data: Annotated[str, msgspec.Meta(min_length=1)]


class UrlSource(msgspec.Struct, tag="url", tag_field="type"):
    url: str


class TextBlock(msgspec.Struct, tag="text", tag_field="type"):
    text: str


class PdfSource(msgspec.Struct, tag="base64", tag_field="type"):
    media_type: Literal["application/pdf"]
    data: Annotated[str, msgspec.Meta(min_length=1)]


class PlainTextSource(msgspec.Struct, tag="text", tag_field="type"):
    media_type: Literal["text/plain"]
    data: str


class DocumentBlock(msgspec.Struct, tag="document", tag_field="type"):
    """A PDF (inline or by URL) or a plain text document."""

    source: PdfSource | UrlSource | PlainTextSource
    title: str | None = None
    context: str | None = None


class ImageBlock(msgspec.Struct, tag="image", tag_field="type"):
    source: Base64Source | UrlSource


class ToolUseBlock(msgspec.Struct, tag="tool_use", tag_field="type"):
    id: str
    name: str
    input: dict[str, Any]


class ToolResultBlock(msgspec.Struct, tag="tool_result", tag_field="type"):
    tool_use_id: str
    content: str | list[TextBlock | ImageBlock | DocumentBlock] | None = None
    is_error: bool = False


Block = TextBlock | ImageBlock | DocumentBlock | ToolUseBlock | ToolResultBlock


class Message(msgspec.Struct):
    role: Literal["user", "assistant"]
    content: str | list[Block]


class Tool(msgspec.Struct):
    name: Annotated[str, msgspec.Meta(pattern=r"^[a-zA-Z0-9_-]{1,128}$")]
    input_schema: dict[str, Any]
    description: str | None = None


class AutoChoice(msgspec.Struct, tag="auto", tag_field="type"):
    disable_parallel_tool_use: bool = False


class AnyChoice(msgspec.Struct, tag="any", tag_field="type"):
    disable_parallel_tool_use: bool = False


class ToolChoiceByName(msgspec.Struct, tag="tool", tag_field="type"):
    name: str
    disable_parallel_tool_use: bool = False


class NoneChoice(msgspec.Struct, tag="none", tag_field="type"):
    pass


ToolChoice = AutoChoice | AnyChoice | ToolChoiceByName | NoneChoice


class MessagesRequest(msgspec.Struct, forbid_unknown_fields=True):
    """A Messages API request; unknown top-level fields are refused, as the real API does."""

    model: Annotated[str, msgspec.Meta(min_length=1)]
    messages: Annotated[list[Message], msgspec.Meta(min_length=1)]
    max_tokens: Annotated[int, msgspec.Meta(ge=1)]
    system: str | list[TextBlock] | None = None
    stop_sequences: list[str] | None = None
    stream: bool = False
    temperature: Annotated[float, msgspec.Meta(ge=0, le=1)] | None = None
    top_p: Annotated[float, msgspec.Meta(ge=0, le=1)] | None = None
    top_k: NonNegative | None = None
    tools: list[Tool] | None = None
    tool_choice: ToolChoice | None = None
    metadata: dict[str, Any] | None = None
    thinking: dict[str, Any] | None = None
    service_tier: Literal["auto", "standard_only"] | None = None  # what the API takes; others are a 400
    # Accepted and ignored: what recent SDKs can send beside the fields above.
    cache_control: dict[str, Any] | None = None
    container: Any = None
    context_management: dict[str, Any] | None = None
    diagnostics: dict[str, Any] | None = None
    inference_geo: str | None = None
    mcp_servers: list[Any] | None = None
    output_config: dict[str, Any] | None = None
    speed: str | None = None
    user_profile_id: str | None = None
    workspace_id: str | None = None


def parse_messages_request(body: Any) -> MessagesRequest:
    """The validated request in decoded JSON `body` (None: unparsable); raises BadRequest."""
    if body is None:
        raise BadRequest("There was an error parsing the body of your request as JSON.")
    try:
        return msgspec.convert(body, MessagesRequest)
    except msgspec.ValidationError as exc:
        raise BadRequest(_validation_message(str(exc))) from exc


def _validation_message(message: str) -> str:
    """msgspec's wording in the API's ``field: problem`` style for missing and unknown fields."""
    for phrase, problem in (("required field `", "Field required"),
                            ("unknown field `", "Extra inputs are not permitted")):
        _, found, rest = message.partition(phrase)
        if found:
            return f"{rest.partition('`')[0]}: {problem}"
    return message


def request_texts(request: MessagesRequest) -> list[list[str]]:
    """The text pieces of the system prompt (when present) and of each message, in order."""
    system = [] if request.system is None else [_texts(request.system)]
    return system + [_texts(message.content) for message in request.messages]


def _texts(content: str | list[Any] | None) -> list[str]:
    if content is None:
        return []
    if isinstance(content, str):
        return [content]
    pieces: list[str] = []
    for block in content:
        if isinstance(block, TextBlock):
            pieces.append(block.text)
        elif isinstance(block, DocumentBlock) and isinstance(block.source, PlainTextSource):
            pieces.append(block.source.data)
        elif isinstance(block, ToolResultBlock):
            pieces.extend(_texts(block.content))
    return pieces


def prompt_tokens(request: MessagesRequest) -> int:
    """The input tokens of `request`: its text (see the module docstring) and its images and
    documents as Anthropic bills them (`simulator.media_billing`)."""
    media = anthropic_media_tokens(msgspec.to_builtins(request.messages))
    return count_prompt_tokens(request_texts(request)) + media


def usage_body(
    input_tokens: int, output_tokens: int, cache_creation: int = 0, cache_read: int = 0,
    cache_creation_1h: int = 0, service_tier: str = "standard",
) -> dict[str, Any]:
    """Anthropic's ``usage`` object; `cache_creation` counts the five-minute writes and
    `cache_creation_1h` the one-hour ones (``cache_creation_input_tokens`` is both)."""
    return {
        "input_tokens": input_tokens,
        "cache_creation_input_tokens": cache_creation + cache_creation_1h,
        "cache_read_input_tokens": cache_read,
        "cache_creation": {"ephemeral_5m_input_tokens": cache_creation,
                           "ephemeral_1h_input_tokens": cache_creation_1h},
        "output_tokens": output_tokens,
        "service_tier": service_tier,
    }


def text_block(text: str) -> dict[str, str]:
    return {"type": "text", "text": text}


def tool_use_block(tool_id: str, name: str, tool_input: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}


def message_body(
    message_id: str,
    model: str,
    content: list[dict[str, Any]],
    stop_reason: str | None,
    stop_sequence: str | None,
    usage: dict[str, Any],
) -> dict[str, Any]:
    """A ``message`` object: the whole JSON answer, or the shell of ``message_start``."""
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": stop_sequence,
        "usage": usage,
    }


def event(name: str, **fields: Any) -> bytes:
    """One SSE frame: ``event: NAME`` and data that repeats the name as its ``type``."""
    payload = orjson.dumps({"type": name, **fields})
    return b"event: " + name.encode() + b"\ndata: " + payload + b"\n\n"


def text_delta(index: int, text: str) -> bytes:
    return event("content_block_delta", index=index, delta={"type": "text_delta", "text": text})


def json_delta(index: int, partial_json: str) -> bytes:
    delta = {"type": "input_json_delta", "partial_json": partial_json}
    return event("content_block_delta", index=index, delta=delta)


def message_delta(stop_reason: str, stop_sequence: str | None, output_tokens: int) -> bytes:
    """The closing delta: why generation stopped, and the (cumulative) output tokens."""
    delta = {"stop_reason": stop_reason, "stop_sequence": stop_sequence}
    return event("message_delta", delta=delta, usage={"output_tokens": output_tokens})


def error_type(status: int) -> str:
    """Anthropic's ``error.type`` for an HTTP status."""
    if status in _ERROR_TYPES:
        return _ERROR_TYPES[status]
    return "api_error" if status >= 500 else "invalid_request_error"


def error_body(status: int, message: str) -> dict[str, Any]:
    """``{"type": "error", "error": {"type", "message"}, "request_id"}``."""
    error = {"type": error_type(status), "message": message}
    return {"type": "error", "error": error, "request_id": new_request_id()}


def error_event(status: int, message: str) -> bytes:
    """An ``error`` event, as Anthropic sends when a stream fails after it started."""
    return event("error", error={"type": error_type(status), "message": message})


def error_response(
    status: int, message: str, *, headers: dict[str, str] | None = None
) -> web.Response:
    return web.Response(
        status=status,
        body=orjson.dumps(error_body(status, message)),
        content_type="application/json",
        headers=headers,
    )


def json_response(payload: dict[str, Any]) -> web.Response:
    """A 200 response with `payload` as its JSON body."""
    return web.Response(
        body=orjson.dumps(payload),
        content_type="application/json",
        headers={"request-id": new_request_id()},
    )


def new_request_id() -> str:
    return f"req_sim_{uuid.uuid4().hex[:24]}"
