"""The Responses request as the gateway reads it: the fields it acts on are typed here, so a wrong
type is a 400 naming the field at the edge, as chat's are (gateway.chat.request), since what the
chat translations carry on reaches the provider adapters; the items inside `input` are checked
where they are translated (`translate`), each refusal naming its place. Unknown fields are
ignored, as the SDKs send more than any one model honours.

This type is also the request schema of the OpenAPI document (gateway.edge.openapi).
"""

from typing import Annotated, Any

import msgspec

from gateway.edge.errors import bad_request

Unit = Annotated[float, msgspec.Meta(ge=0, le=1)]
# Work the gateway cannot do on a request's behalf: it answers synchronously, and keeps no
# server-side conversations or prompt templates.
REFUSED = {"background": "background responses are not supported: send the request without background",
           "conversation": "conversations are not supported: pass previous_response_id or the input items",
           "prompt": "stored prompt templates are not supported: send instructions and input"}


class Reasoning(msgspec.Struct):
    effort: str | None = None  # becomes chat's reasoning_effort
    summary: str | None = None


class TextFormat(msgspec.Struct):
    """`text.format`: what becomes chat's response_format."""

    type: str
    name: str | None = None
    description: str | None = None
    schema: dict[str, Any] | None = None  # JSON Schema
    strict: bool | None = None


class TextOptions(msgspec.Struct):
    format: TextFormat | None = None
    verbosity: str | None = None


class ToolSpec(msgspec.Struct):
    """One of `tools`; which types a model takes is checked where they are translated, but the
    fields a function tool carries into chat's are typed here (hosted tools' others pass)."""

    type: str
    name: str | None = None
    description: str | None = None
    parameters: dict[str, Any] | None = None  # JSON Schema
    strict: bool | None = None


class ToolChoice(msgspec.Struct):
    type: str
    name: str | None = None


class ResponsesRequest(msgspec.Struct):
    model: str
    input: str | list[dict[str, Any]] | None = None
    instructions: str | None = None
    previous_response_id: str | None = None
    stream: bool = False
    store: bool = True
    max_output_tokens: Annotated[int, msgspec.Meta(ge=1)] | None = None
    temperature: Annotated[float, msgspec.Meta(ge=0, le=2)] | None = None
    top_p: Unit | None = None
    tools: list[ToolSpec] | None = None
    tool_choice: str | ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    text: TextOptions | None = None
    reasoning: Reasoning | None = None
    metadata: dict[str, str] | None = None
    user: str | None = None
    background: bool | None = None
    conversation: str | dict[str, Any] | None = None
    prompt: dict[str, Any] | None = None
    service_tier: str | None = None  # carried into the chat translation (Bedrock reads it)


def check(request: ResponsesRequest) -> None:
    """400 for what the gateway cannot honour, before any upstream call."""
    for name, message in REFUSED.items():
        if getattr(request, name):
            raise bad_request(message, name)
    if request.input is None and request.previous_response_id is None:
        raise bad_request("input is required", "input")
