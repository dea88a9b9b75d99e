"""Anthropic's Messages request as the gateway reads it (POST /v1/messages): every field the
translation to OpenAI chat reads (gateway.messages.wire) is typed here, so a wrong type is a
400 naming the field at the edge. Unknown fields pass through to a native provider untouched.

These types are also the request schema of the OpenAPI document (gateway.edge.openapi).
"""

from typing import Annotated, Any, Literal

import msgspec

from gateway.chat.request import Unit


class Source(msgspec.Struct, omit_defaults=True):
    """An image's (or document's) source: base64 `data` with its media type, or a `url`."""

    type: str
    media_type: str | None = None
    data: str | None = None
    url: str | None = None


class Block(msgspec.Struct, omit_defaults=True):
    """A content block: text, image, tool_use, tool_result, thinking, ..."""

    type: str
    text: str | None = None
    source: Source | None = None
    id: str | None = None
    name: str | None = None
    input: dict[str, Any] | None = None
    tool_use_id: str | None = None
    content: "str | list[Block] | None" = None
    is_error: bool | None = None


class InputMessage(msgspec.Struct):
    role: Literal["user", "assistant"]
    content: str | list[Block]


class AnthropicTool(msgspec.Struct, omit_defaults=True):
    name: str | None = None
    type: str | None = None
    description: str | None = None
    input_schema: dict[str, Any] | None = None


class AnthropicToolChoice(msgspec.Struct, omit_defaults=True):
    type: str
    name: str | None = None
    disable_parallel_tool_use: bool | None = None


class Metadata(msgspec.Struct, omit_defaults=True):
    user_id: str | None = None


class MessagesRequest(msgspec.Struct):
    """The fields the gateway itself acts on; the rest goes to the provider (or is translated)."""

    model: str
    messages: Annotated[list[InputMessage], msgspec.Meta(min_length=1)]
    max_tokens: Annotated[int, msgspec.Meta(ge=1)]
    system: str | list[Block] | None = None
    stream: bool = False
    stop_sequences: list[str] | None = None
    tools: list[AnthropicTool] | None = None
    tool_choice: AnthropicToolChoice | None = None
    metadata: Metadata | None = None
    temperature: Unit | None = None
    top_p: Unit | None = None
    top_k: Annotated[int, msgspec.Meta(ge=0)] | None = None
