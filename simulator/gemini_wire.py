"""Gemini API wire format (``generateContent``): request schema, response bodies, errors.

Only the shapes live here; a handler per kind of model (`gemini_music`, later chat)
decides what to send. Field names are the REST API's camelCase.

Token accounting (deterministic, so tests can predict it):

* promptTokenCount: the chat rule of `simulator.textgen` applied to contents
  (words of each text part + 4 per content), plus IMAGE_TOKENS per inlineData part.
* usageMetadata leaves out candidatesTokenCount when it is 0, as the real API
  omits zero-valued fields (e.g. for a blocked prompt).
"""

import base64
import binascii
from types import MappingProxyType
from typing import Annotated, Any

import msgspec
import orjson
from aiohttp import web

from simulator.textgen import count_prompt_tokens

IMAGE_TOKENS = 258  # what Gemini bills for one image part

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


class Part(msgspec.Struct, rename="camel"):
    """One part of a content: text or inline data (other kinds are not simulated)."""

    text: str | None = None
    inline_data: Blob | None = None


class Content(msgspec.Struct):
    """One turn: a role ("user" / "model") and its non-empty parts."""

    parts: Annotated[list[Part], msgspec.Meta(min_length=1)]
    role: str | None = None


class GenerateContentRequest(msgspec.Struct, rename="camel"):
    """The fields the simulator reads; unknown fields are accepted and ignored."""

    contents: Annotated[list[Content], msgspec.Meta(min_length=1)]
    generation_config: dict[str, Any] | None = None


def parse_generate_content(body: Any) -> GenerateContentRequest:
    """The validated request in decoded JSON `body` (None: unparsable); raises InvalidArgument."""
    if body is None:
        raise InvalidArgument("Invalid JSON payload received.")
    try:
        request = msgspec.convert(body, GenerateContentRequest)
    except msgspec.ValidationError as exc:
        raise InvalidArgument(f"Invalid generateContent request: {exc}") from exc
    for index, part in enumerate(part for content in request.contents for part in content.parts):
        _check_part(index, part)
    return request


def _check_part(index: int, part: Part) -> None:
    """A part must carry text or inline data, and inline data must be valid base64."""
    if part.text is None and part.inline_data is None:
        raise InvalidArgument(f"Part {index} has no data: set `text` or `inlineData`.")
    if part.inline_data is not None:
        try:
            base64.b64decode(part.inline_data.data, validate=True)
        except (binascii.Error, ValueError):
            raise InvalidArgument(f"Part {index}: inlineData.data is not valid base64.") from None


def request_texts(request: GenerateContentRequest) -> list[list[str]]:
    """The text pieces of each content, in order."""
    return [[p.text for p in content.parts if p.text is not None] for content in request.contents]


def prompt_token_count(request: GenerateContentRequest) -> int:
    """promptTokenCount of `request` (see the module docstring)."""
    images = sum(p.inline_data is not None for c in request.contents for p in c.parts)
    return count_prompt_tokens(request_texts(request)) + IMAGE_TOKENS * images


def usage_metadata(prompt_tokens: int, candidates_tokens: int) -> dict[str, int]:
    """Gemini's ``usageMetadata`` (candidatesTokenCount omitted when 0)."""
    usage = {"promptTokenCount": prompt_tokens}
    if candidates_tokens:
        usage["candidatesTokenCount"] = candidates_tokens
    usage["totalTokenCount"] = prompt_tokens + candidates_tokens
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
