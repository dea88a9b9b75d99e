"""Gemini API wire format (``generateContent``): request schema, response bodies, errors.

Only the shapes live here; a handler per kind of model (`gemini_music`, `gemini_chat`)
decides what to send. Field names are the REST API's camelCase.

Token accounting (deterministic, so tests can predict it):

* promptTokenCount: the chat rule of `simulator.textgen` applied to contents
  (words of each text part + 4 per content), plus what each inlineData part bills
  (`simulator.media_billing.gemini_inline`: 258 for a small image, ...).
* usageMetadata leaves out candidatesTokenCount when it is 0, as the real API
  omits zero-valued fields (e.g. for a blocked prompt); so are cachedContentTokenCount
  and thoughtsTokenCount. totalTokenCount counts thoughts too.
"""

import base64
import binascii
from types import MappingProxyType
from typing import Annotated, Any, Literal, TypeVar

import msgspec
import orjson
from aiohttp import web

from simulator.media_billing import gemini_inline
from simulator.textgen import count_prompt_tokens


# google.rpc.Code names of the HTTP statuses the API answers with.
_RPC_STATUS = MappingProxyType({
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "NOT_IMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
})

HARM_CATEGORIES = (
    "HARM_CATEGORY_HATE_SPEECH",
    "HARM_CATEGORY_DANGEROUS_CONTENT",
    "HARM_CATEGORY_HARASSMENT",
    "HARM_CATEGORY_SEXUALLY_EXPLICIT",
)


class InvalidArgument(ValueError):
    """A request the real API would reject with 400 INVALID_ARGUMENT; the message says why."""


class Blob(msgspec.Struct, rename="camel"):
    """Inline bytes: ``{"mimeType": ..., "data": <base64>}``."""

    mime_type: Annotated[str, msgspec.Meta(min_length=1)]
    data: Annotated[str, msgspec.Meta(min_length=1)]


class FunctionCall(msgspec.Struct, forbid_unknown_fields=True):
    """A call the model made: ``{"name": ..., "args": {...}}``."""

    name: Annotated[str, msgspec.Meta(min_length=1)]
    args: dict[str, Any] | None = None
    id: str | None = None


class FunctionResponse(msgspec.Struct, forbid_unknown_fields=True):
    """The result of a call, sent back by the client: ``{"name": ..., "response": {...}}``."""

    name: Annotated[str, msgspec.Meta(min_length=1)]
    response: dict[str, Any]
    id: str | None = None


class Part(msgspec.Struct, rename="camel"):
    """One part of a content: text, inline data, or a function call or response."""

    text: str | None = None
    inline_data: Blob | None = None
    function_call: FunctionCall | None = None
    function_response: FunctionResponse | None = None

    @property
    def kinds(self) -> int:
        """How many kinds of data the part holds (the API demands exactly one)."""
        fields = (self.text, self.inline_data, self.function_call, self.function_response)
        return sum(value is not None for value in fields)


class Content(msgspec.Struct):
    """One turn: a role ("user" / "model") and its non-empty parts."""

    parts: Annotated[list[Part], msgspec.Meta(min_length=1)]
    role: str | None = None


class ContentsRequest(msgspec.Struct, rename="camel"):
    """What every generateContent request holds and every model reads: its contents."""

    contents: Annotated[list[Content], msgspec.Meta(min_length=1)]


class GenerateContentRequest(ContentsRequest):
    """A non-chat model's request: the fields it reads; unknown fields are accepted and ignored."""

    generation_config: dict[str, Any] | None = None


class FunctionDeclaration(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    """A function the model may call; its parameters as an OpenAPI or a JSON Schema."""

    name: Annotated[str, msgspec.Meta(min_length=1)]
    description: str | None = None
    parameters: dict[str, Any] | None = None
    parameters_json_schema: dict[str, Any] | None = None
    response: dict[str, Any] | None = None
    response_json_schema: dict[str, Any] | None = None
    behavior: str | None = None

    @property
    def schema(self) -> dict[str, Any]:
        return self.parameters_json_schema or self.parameters or {}


class Tool(msgspec.Struct, rename="camel"):
    """A tool; only function declarations are simulated (search, code execution are ignored)."""

    function_declarations: list[FunctionDeclaration] | None = None


class FunctionCallingConfig(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    mode: Literal["MODE_UNSPECIFIED", "AUTO", "ANY", "NONE", "VALIDATED"] = "AUTO"
    allowed_function_names: list[str] | None = None


class ToolConfig(msgspec.Struct, rename="camel"):
    function_calling_config: FunctionCallingConfig | None = None


class GenerationConfig(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    """A chat request's generationConfig; an unknown name is a 400, as the real API answers."""

    stop_sequences: Annotated[list[str], msgspec.Meta(max_length=5)] | None = None
    response_mime_type: Literal["text/plain", "application/json", "text/x.enum"] | None = None
    response_schema: dict[str, Any] | None = None
    response_json_schema: Any = None
    response_modalities: list[str] | None = None
    candidate_count: Annotated[int, msgspec.Meta(ge=1, le=8)] | None = None
    max_output_tokens: Annotated[int, msgspec.Meta(ge=1)] | None = None
    temperature: Annotated[float, msgspec.Meta(ge=0, le=2)] | None = None
    top_p: Annotated[float, msgspec.Meta(ge=0, le=1)] | None = None
    top_k: Annotated[int, msgspec.Meta(ge=1)] | None = None
    seed: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    response_logprobs: bool | None = None
    logprobs: int | None = None
    thinking_config: dict[str, Any] | None = None
    media_resolution: str | None = None
    speech_config: dict[str, Any] | None = None
    enable_enhanced_civic_answers: bool | None = None


class ChatRequest(ContentsRequest, forbid_unknown_fields=True):
    """A chat model's generateContent request: an unknown field is a 400, as the real API answers."""

    generation_config: GenerationConfig | None = None
    system_instruction: Content | None = None
    tools: list[Tool] | None = None
    tool_config: ToolConfig | None = None
    safety_settings: list[dict[str, Any]] | None = None
    cached_content: str | None = None
    labels: dict[str, str] | None = None

    @property
    def functions(self) -> list[FunctionDeclaration]:
        return [f for tool in self.tools or () for f in tool.function_declarations or ()]


_Request = TypeVar("_Request", bound=ContentsRequest)


def parse_generate_content(body: Any) -> GenerateContentRequest:
    """The validated request in decoded JSON `body` (None: unparsable); raises InvalidArgument."""
    return _parse(body, GenerateContentRequest)


def _parse(body: Any, schema: type[_Request]) -> _Request:
    """`body` as `schema`, every part holding one valid kind of data; raises InvalidArgument."""
    if body is None:
        raise InvalidArgument("Invalid JSON payload received.")
    try:
        request = msgspec.convert(body, schema)
    except msgspec.ValidationError as exc:
        raise InvalidArgument(f"Invalid generateContent request: {exc}") from exc
    for index, part in enumerate(part for content in request.contents for part in content.parts):
        _check_part(index, part)
    return request


def parse_chat_request(body: Any) -> ChatRequest:
    """A chat model's validated request: roles user/model, a text-only systemInstruction."""
    request = _parse(body, ChatRequest)
    if any(content.role not in (None, "user", "model") for content in request.contents):
        raise InvalidArgument("Please use a valid role: user, model.")
    system = request.system_instruction
    if system is not None and any(part.text is None for part in system.parts):
        raise InvalidArgument("systemInstruction may only hold text parts.")
    return request


def _check_part(index: int, part: Part) -> None:
    """A part must carry one kind of data, and inline data must be valid base64."""
    if part.kinds != 1:
        raise InvalidArgument(
            f"Part {index} must hold exactly one of `text`, `inlineData`, `functionCall` or"
            " `functionResponse`."
        )
    if part.inline_data is not None:
        try:
            base64.b64decode(part.inline_data.data, validate=True)
        except (binascii.Error, ValueError):
            raise InvalidArgument(f"Part {index}: inlineData.data is not valid base64.") from None


def request_texts(request: ContentsRequest) -> list[list[str]]:
    """The text pieces of each content, in order."""
    return [[p.text for p in content.parts if p.text is not None] for content in request.contents]


def prompt_token_count(request: ContentsRequest) -> int:
    """promptTokenCount of `request` (see the module docstring)."""
    return count_prompt_tokens(request_texts(request)) + media_tokens(request.contents)


def media_tokens(contents: list[Content]) -> int:
    """What the inlineData parts of `contents` cost (`simulator.media_billing`)."""
    return sum(gemini_inline(p.inline_data.mime_type, p.inline_data.data)
               for c in contents for p in c.parts if p.inline_data is not None)


def usage_metadata(
    prompt_tokens: int, candidates_tokens: int, *, cached: int = 0, thoughts: int = 0
) -> dict[str, int]:
    """Gemini's ``usageMetadata`` (zero counts other than the prompt's omitted)."""
    usage = {"promptTokenCount": prompt_tokens}
    if candidates_tokens:
        usage["candidatesTokenCount"] = candidates_tokens
    usage["totalTokenCount"] = prompt_tokens + candidates_tokens + thoughts
    if cached:
        usage["cachedContentTokenCount"] = cached
    if thoughts:
        usage["thoughtsTokenCount"] = thoughts
    return usage


def text_part(text: str) -> dict[str, str]:
    return {"text": text}


def inline_data_part(mime_type: str, data: bytes) -> dict[str, dict[str, str]]:
    """An ``inlineData`` part carrying `data` base64-encoded."""
    return {"inlineData": {"mimeType": mime_type, "data": base64.b64encode(data).decode()}}


def candidate(parts: list[dict[str, Any]], finish_reason: str = "STOP") -> dict[str, Any]:
    """The single candidate of an answer: the model's content and why generation stopped."""
    return {"content": {"role": "model", "parts": parts}, "finishReason": finish_reason, "index": 0}


def safety_stopped_candidate() -> dict[str, Any]:
    """A candidate the safety filter stopped: no content, finishReason SAFETY, and ratings."""
    return {"finishReason": "SAFETY", "index": 0, "safetyRatings": safety_ratings()}


def safety_ratings(blocked: str = "HARM_CATEGORY_DANGEROUS_CONTENT") -> list[dict[str, Any]]:
    """A rating per harm category; `blocked` is rated HIGH and marked blocked."""
    return [
        {"category": c, "probability": "HIGH", "blocked": True}
        if c == blocked
        else {"category": c, "probability": "NEGLIGIBLE"}
        for c in HARM_CATEGORIES
    ]


def generate_content_body(
    candidates: list[dict[str, Any]], usage: dict[str, int], model: str
) -> dict[str, Any]:
    """A ``GenerateContentResponse`` carrying `candidates`."""
    return {"candidates": candidates, "usageMetadata": usage, "modelVersion": model}


def prompt_blocked_body(usage: dict[str, int], model: str) -> dict[str, Any]:
    """The 200 answer to a prompt the safety filter blocked: promptFeedback, no candidates."""
    feedback = {"blockReason": "SAFETY", "safetyRatings": safety_ratings()}
    return {"promptFeedback": feedback, "usageMetadata": usage, "modelVersion": model}


def rpc_status(code: int) -> str:
    """The google.rpc status name Gemini pairs with HTTP status `code` ("UNKNOWN" if none)."""
    return _RPC_STATUS.get(code, "UNKNOWN")


def error_response(
    code: int, message: str, *, headers: dict[str, str] | None = None
) -> web.Response:
    """A Gemini-style error: ``{"error": {"code", "message", "status"}}``."""
    body = {"error": {"code": code, "message": message, "status": rpc_status(code)}}
    return web.Response(
        status=code, body=orjson.dumps(body), content_type="application/json", headers=headers
    )


def simulated_error(code: int) -> web.Response:
    """The error a ``[sim:status=CODE]`` directive asks for (429 adds ``Retry-After: 1``)."""
    headers = {"Retry-After": "1"} if code == 429 else None
    return error_response(code, f"simulated error {code}", headers=headers)


def json_response(payload: dict[str, Any]) -> web.Response:
    """A 200 response with `payload` as its JSON body."""
    return web.Response(body=orjson.dumps(payload), content_type="application/json")
