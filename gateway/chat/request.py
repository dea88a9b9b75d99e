"""The OpenAI chat request as the gateway reads it: every field a provider translation reads is
typed here, so a wrong type is a 400 naming the field at the edge, never an exception deep in a
translation (gateway.providers.anthropic.wire, gateway.providers.google.chat_request). Unknown fields pass through to
upstream untouched (msgspec ignores them here; the handler forwards the raw body).

These types are also the request schemas of the OpenAPI document (gateway.edge.openapi).
"""

from typing import Annotated, Any, Literal

import msgspec

# The largest body of a chat-shaped request (chat, completions, Messages, Responses): images and
# audio travel inline, base64-encoded.
BODY_BYTES = 32 * 1024 * 1024

Unit = Annotated[float, msgspec.Meta(ge=0, le=1)]
Penalty = Annotated[float, msgspec.Meta(ge=-2, le=2)]
PositiveInt = Annotated[int, msgspec.Meta(ge=1)]


class ImageUrl(msgspec.Struct, omit_defaults=True):
    url: str
    detail: str | None = None


class InputAudio(msgspec.Struct):
    data: str
    format: str


class FileData(msgspec.Struct, omit_defaults=True):
    file_data: str | None = None
    file_id: str | None = None
    filename: str | None = None


class ContentPart(msgspec.Struct, omit_defaults=True):
    """One part of a message's content: text, image_url, input_audio or file."""

    type: str
    text: str | None = None
    image_url: ImageUrl | str | None = None
    input_audio: InputAudio | None = None
    file: FileData | None = None


class FunctionCall(msgspec.Struct, omit_defaults=True):
    name: str | None = None
    arguments: str | None = None  # a JSON object, as text


class ToolCall(msgspec.Struct, omit_defaults=True):
    """A tool call of an earlier assistant message."""

    id: str | None = None
    type: str = "function"
    function: FunctionCall | None = None


class Message(msgspec.Struct, omit_defaults=True):
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = None
    name: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None


class FunctionSpec(msgspec.Struct, omit_defaults=True):
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None  # JSON Schema
    strict: bool | None = None


class Tool(msgspec.Struct, omit_defaults=True):
    type: str
    function: FunctionSpec | None = None


class ToolName(msgspec.Struct):
    name: str


class NamedToolChoice(msgspec.Struct, omit_defaults=True):
    type: str = "function"
    function: ToolName | None = None


class JsonSchemaFormat(msgspec.Struct, omit_defaults=True):
    name: str | None = None
    schema: dict[str, Any] | None = None
    strict: bool | None = None


class ResponseFormat(msgspec.Struct, omit_defaults=True):
    type: str
    json_schema: JsonSchemaFormat | None = None


class StreamOptions(msgspec.Struct):
    include_usage: bool = False


class ChatRequest(msgspec.Struct):
    """POST /v1/chat/completions: the fields the gateway and its translations act on."""

    model: str
    messages: Annotated[list[Message], msgspec.Meta(min_length=1)]
    max_tokens: PositiveInt | None = None
    max_completion_tokens: PositiveInt | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    stop: str | list[str] | None = None
    tools: list[Tool] | None = None
    tool_choice: str | NamedToolChoice | None = None
    parallel_tool_calls: bool | None = None
    response_format: ResponseFormat | None = None
    reasoning_effort: str | None = None
    user: str | None = None
    temperature: Annotated[float, msgspec.Meta(ge=0, le=2)] | None = None
    top_p: Unit | None = None
    top_k: PositiveInt | None = None
    n: Annotated[int, msgspec.Meta(ge=1, le=128)] | None = None
    seed: int | None = None
    presence_penalty: Penalty | None = None
    frequency_penalty: Penalty | None = None
    service_tier: str | None = None  # OpenAI's go up as sent; Bedrock's translation reads it
