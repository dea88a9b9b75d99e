"""Bedrock Runtime's wire shapes: the Converse request schema, usage, and AWS's REST-JSON errors.

Only the shapes live here; `bedrock_converse` and `bedrock_invoke` decide what to send.

The Converse request is validated like the service does: every content block must hold exactly
one known member, a malformed body is a 400 ValidationException; the top-level fields AWS
documents are accepted (the ones the simulator has no use for are ignored), others refused.

Token accounting (deterministic, as on the other routes): the chat rule of `simulator.textgen`
over the system prompt (one message when present) and each message's text pieces (text blocks,
and the text and JSON of tool results), plus images and documents billed by Anthropic's rule
(`simulator.media_billing`; Bedrock's chat models are mostly Claude). Of that total AWS reports
``inputTokens`` WITHOUT the cached tokens: cacheReadInputTokens and cacheWriteInputTokens are
apart and additive, and totalTokens = input + output + cacheRead + cacheWrite. cacheWrite counts
the writes of both lifetimes; ``cacheDetails`` (sent when there are writes) splits them by TTL,
"1h" before "5m" as AWS sorts them.

A request's ``serviceTier`` must be one of AWS's ServiceTierType values; the answer names the
tier served in its own ``serviceTier`` (a stream in its metadata event).
"""

import uuid
from types import MappingProxyType
from typing import Annotated, Any, Literal

import msgspec
import orjson
from aiohttp import web

from simulator.media_billing import anthropic_block
from simulator.textgen import count_prompt_tokens

ERROR_NAMESPACE = "http://internal.amazon.com/coral/com.amazon.bedrock/"
# The exception AWS names for a status, for `[sim:status=N]`.
ERROR_NAMES = MappingProxyType({
    400: "ValidationException", 403: "AccessDeniedException", 404: "ResourceNotFoundException",
    408: "ModelTimeoutException", 424: "ModelErrorException", 429: "ThrottlingException",
    500: "InternalServerException", 503: "ServiceUnavailableException",
})  # fmt: skip
# The status AWS answers a named exception with, for `[sim:aws_error=NAME]`.
ERROR_STATUSES = MappingProxyType({
    **{name: status for status, name in ERROR_NAMES.items()},
    "ModelNotReadyException": 429, "ServiceQuotaExceededException": 400,
    "UnrecognizedClientException": 403, "InvalidSignatureException": 403,
    "ExpiredTokenException": 403, "MissingAuthenticationTokenException": 403,
    "IncompleteSignatureException": 403,
})  # fmt: skip


class BadRequest(ValueError):
    """A request AWS would refuse with 400 ValidationException."""


class ImageSource(msgspec.Struct, forbid_unknown_fields=True):
    bytes: str | None = None  # base64 on the JSON wire
    s3Location: dict[str, Any] | None = None


class Image(msgspec.Struct, forbid_unknown_fields=True):
    format: str
    source: ImageSource


class Document(msgspec.Struct, forbid_unknown_fields=True):
    format: str
    name: str
    source: ImageSource


class ToolUse(msgspec.Struct, forbid_unknown_fields=True):
    toolUseId: str
    name: str
    input: Any


class ToolResultBlock(msgspec.Struct, forbid_unknown_fields=True):
    text: str | None = None
    json: Any = None
    image: Image | None = None
    document: Document | None = None


class ToolResult(msgspec.Struct, forbid_unknown_fields=True):
    toolUseId: str
    content: list[ToolResultBlock]
    status: str | None = None


class ContentBlock(msgspec.Struct, forbid_unknown_fields=True):
    """A union in AWS's style: exactly one member is set (`check_union`)."""

    text: str | None = None
    image: Image | None = None
    document: Document | None = None
    toolUse: ToolUse | None = None
    toolResult: ToolResult | None = None
    cachePoint: dict[str, Any] | None = None
    guardContent: dict[str, Any] | None = None
    reasoningContent: dict[str, Any] | None = None
    video: dict[str, Any] | None = None
    citationsContent: dict[str, Any] | None = None


class SystemBlock(msgspec.Struct, forbid_unknown_fields=True):
    text: str | None = None
    cachePoint: dict[str, Any] | None = None
    guardContent: dict[str, Any] | None = None


class Message(msgspec.Struct, forbid_unknown_fields=True):
    role: Annotated[str, msgspec.Meta(pattern="^(user|assistant)$")]
    content: list[ContentBlock]


class InferenceConfig(msgspec.Struct, forbid_unknown_fields=True):
    maxTokens: Annotated[int, msgspec.Meta(ge=1)] | None = None
    temperature: Annotated[float, msgspec.Meta(ge=0, le=1)] | None = None
    topP: Annotated[float, msgspec.Meta(ge=0, le=1)] | None = None
    stopSequences: Annotated[list[str], msgspec.Meta(max_length=2500)] | None = None


class ToolSpec(msgspec.Struct, forbid_unknown_fields=True):
    name: Annotated[str, msgspec.Meta(pattern=r"^[a-zA-Z0-9_-]{1,64}$")]
    inputSchema: dict[str, Any]
    description: str | None = None
    strict: bool | None = None


class Tool(msgspec.Struct, forbid_unknown_fields=True):
    toolSpec: ToolSpec | None = None
    cachePoint: dict[str, Any] | None = None


class ToolChoice(msgspec.Struct, forbid_unknown_fields=True):
    auto: dict[str, Any] | None = None
    any: dict[str, Any] | None = None
    tool: dict[str, str] | None = None


class ToolConfig(msgspec.Struct, forbid_unknown_fields=True):
    tools: Annotated[list[Tool], msgspec.Meta(min_length=1)]
    toolChoice: ToolChoice | None = None


class ServiceTier(msgspec.Struct, forbid_unknown_fields=True):
    type: Literal["priority", "default", "flex", "reserved"]


class ConverseRequest(msgspec.Struct, forbid_unknown_fields=True):
    """A Converse / ConverseStream body (the model id travels in the path)."""

    messages: list[Message] = msgspec.field(default_factory=list)
    system: list[SystemBlock] | None = None
    inferenceConfig: InferenceConfig | None = None
    toolConfig: ToolConfig | None = None
    # Accepted and ignored: documented fields the simulator has no use for.
    guardrailConfig: dict[str, Any] | None = None
    additionalModelRequestFields: Any = None
    promptVariables: dict[str, Any] | None = None
    additionalModelResponseFieldPaths: list[str] | None = None
    requestMetadata: dict[str, str] | None = None
    performanceConfig: dict[str, Any] | None = None
    serviceTier: ServiceTier | None = None
    outputConfig: dict[str, Any] | None = None

    @property
    def max_tokens(self) -> int | None:
        return self.inferenceConfig.maxTokens if self.inferenceConfig else None

    @property
    def stop_sequences(self) -> list[str]:
        return (self.inferenceConfig.stopSequences or []) if self.inferenceConfig else []

    @property
    def tool_specs(self) -> list[ToolSpec]:
        tools = self.toolConfig.tools if self.toolConfig else []
        return [tool.toolSpec for tool in tools if tool.toolSpec is not None]


def parse_converse(body: Any) -> ConverseRequest:
    """The validated request in decoded JSON `body` (None: unparsable); raises BadRequest."""
    if not isinstance(body, dict):
        raise BadRequest("Malformed input request, please reformat your input and try again.")
    try:
        request = msgspec.convert(body, ConverseRequest)
    except msgspec.ValidationError as exc:
        raise BadRequest(f"Malformed input request: {exc}, please reformat your input and try again.") from exc
    if not request.messages and not request.system:
        raise BadRequest("A conversation must start with a user message. Try again with a conversation "
                         "that starts with a user message.")
    for message in request.messages:
        for block in message.content:
            check_union(block)
    return request


def check_union(block: msgspec.Struct) -> None:
    """AWS's unions carry exactly one member; raises BadRequest otherwise."""
    members = [name for name in block.__struct_fields__ if getattr(block, name) is not None]
    if len(members) != 1:
        raise BadRequest(f"Malformed input request: a content block needs exactly one member, got {members}.")


def request_texts(request: ConverseRequest) -> list[list[str]]:
    """The text pieces of the system prompt (when present) and of each message, in order."""
    system = [[block.text for block in request.system if block.text is not None]] if request.system else []
    return system + [_texts(message.content) for message in request.messages]


def _texts(content: list[ContentBlock]) -> list[str]:
    pieces: list[str] = []
    for block in content:
        if block.text is not None:
            pieces.append(block.text)
        elif block.toolResult is not None:
            pieces.extend(_result_text(part) for part in block.toolResult.content
                          if part.text is not None or part.json is not None)
    return pieces


def _result_text(part: ToolResultBlock) -> str:
    return part.text if part.text is not None else orjson.dumps(part.json).decode()


def media_tokens(request: ConverseRequest) -> int:
    """Images and documents, billed by Anthropic's rule (as Anthropic's own blocks)."""
    blocks = [block for message in request.messages for block in message.content]
    results = [part for block in blocks if block.toolResult for part in block.toolResult.content]
    return (sum(_media(block.image, block.document) for block in blocks)
            + sum(_media(part.image, part.document) for part in results))


def _media(image: Image | None, document: Document | None) -> int:
    if image is not None:
        return anthropic_block({"type": "image", "source": {"type": "base64", "data": image.source.bytes}})
    if document is not None and document.format == "pdf":
        return anthropic_block({"type": "document", "source": {"type": "base64", "data": document.source.bytes}})
    return 0


def prompt_tokens(request: ConverseRequest) -> int:
    """All input tokens of `request`: text (the chat rule) and media."""
    return count_prompt_tokens(request_texts(request)) + media_tokens(request)


def usage_body(input_tokens: int, output_tokens: int, cache_read: int, cache_write: int,
               cache_write_1h: int = 0) -> dict[str, Any]:
    """Converse's ``usage``: `input_tokens` already excludes the cached ones; `cache_write` counts
    the five-minute writes, `cache_write_1h` the one-hour ones."""
    written = cache_write + cache_write_1h
    usage: dict[str, Any] = {"inputTokens": input_tokens, "outputTokens": output_tokens,
                             "totalTokens": input_tokens + output_tokens + cache_read + written,
                             "cacheReadInputTokens": cache_read, "cacheWriteInputTokens": written}
    if written:
        details = (("1h", cache_write_1h), ("5m", cache_write))
        usage["cacheDetails"] = [{"ttl": ttl, "inputTokens": tokens} for ttl, tokens in details if tokens]
    return usage


def new_request_id() -> str:
    return str(uuid.uuid4())


def error_response(status: int, name: str, message: str) -> web.Response:
    """An error as AWS's REST-JSON services send it: the name in ``x-amzn-ErrorType`` (with
    its namespace, which botocore strips), ``{"message": ...}`` as the body."""
    headers = {"x-amzn-ErrorType": f"{name}:{ERROR_NAMESPACE}", "x-amzn-RequestId": new_request_id()}
    return web.Response(status=status, body=orjson.dumps({"message": message}),
                        content_type="application/json", headers=headers)


def named_error(name: str, message: str | None = None) -> web.Response:
    """The error `name` with the status AWS gives it (500 for a name it does not know)."""
    return error_response(ERROR_STATUSES.get(name, 500), name, message or f"simulated {name}")


def status_error(status: int) -> web.Response:
    """The error ``[sim:status=N]`` asks for, named as AWS names that status."""
    fallback = "InternalServerException" if status >= 500 else "ValidationException"
    return error_response(status, ERROR_NAMES.get(status, fallback), f"simulated error {status}")


def json_response(payload: Any, headers: dict[str, str] | None = None) -> web.Response:
    """A 200 JSON answer with AWS's request id."""
    return web.Response(body=orjson.dumps(payload), content_type="application/json",
                        headers={"x-amzn-RequestId": new_request_id(), **(headers or {})})
