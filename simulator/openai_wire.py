"""OpenAI chat-completions wire format: request schema, response bodies, SSE chunks, errors.

Only the shapes live here; `openai_chat` decides what to send and when.
"""

from typing import Annotated, Any, Literal

import msgspec
import orjson
from aiohttp import web

from simulator.directives import Directives

NonNegative = Annotated[int, msgspec.Meta(ge=0)]
# The request's `service_tier` values the API takes (another is a 400, as there).
ServiceTier = Literal["auto", "default", "flex", "scale", "priority", "fast"]

# A status and a JSON body: how a request is answered without a connection (a batch line).
JsonAnswer = tuple[int, dict[str, Any]]
SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
DONE_EVENT = b"data: [DONE]\n\n"


class ContentPart(msgspec.Struct):
    """One part of a list content; only ``{"type": "text"}`` parts carry prompt text."""

    type: str
    text: str | None = None


class Message(msgspec.Struct):
    """A chat message; content may be absent (e.g. assistant tool calls)."""

    role: str
    content: str | list[ContentPart] | None = None


class StreamOptions(msgspec.Struct):
    include_usage: bool | None = None


class OpenAIDirectives(Directives, frozen=True, forbid_unknown_fields=True):
    """The chat directives plus `served_tier`: report this `service_tier` as the one served,
    whatever the request asked for (as OpenAI does when it cannot serve the tier asked)."""

    served_tier: str | None = None


NO_OPENAI_DIRECTIVES = OpenAIDirectives()


def served_tier(requested: str | None, directives: OpenAIDirectives) -> str:
    """The `service_tier` an answer reports: the directive's, else the tier asked for as OpenAI
    reports it (none or "auto": the project's default, "default"; "fast" is served as "priority")."""
    if directives.served_tier is not None:
        return directives.served_tier
    if requested is None or requested == "auto":
        return "default"
    return "priority" if requested == "fast" else requested


class ChatRequest(msgspec.Struct):
    """The fields the simulator reads; unknown fields are accepted and ignored."""

    model: str
    messages: Annotated[list[Message], msgspec.Meta(min_length=1)]
    max_tokens: NonNegative | None = None
    max_completion_tokens: NonNegative | None = None
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    service_tier: ServiceTier | None = None

    @property
    def include_usage(self) -> bool:
        """Whether the stream ends with a usage chunk (``stream_options.include_usage``)."""
        return bool(self.stream_options and self.stream_options.include_usage)

    @property
    def token_limit(self) -> int | None:
        """The tighter of max_tokens / max_completion_tokens, None when neither is given."""
        limits = [n for n in (self.max_tokens, self.max_completion_tokens) if n is not None]
        return min(limits) if limits else None


def message_texts(message: Message) -> list[str]:
    """The text pieces of one message: its string content, or the text of each text part."""
    content = message.content
    if content is None:
        return []
    if isinstance(content, str):
        return [content]
    return [part.text for part in content if part.type == "text" and part.text is not None]


def usage_body(prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0) -> dict[str, Any]:
    """OpenAI's ``usage`` object; cached prompt tokens, if any, are reported in its details."""
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    if cached_tokens:
        usage["prompt_tokens_details"] = {"cached_tokens": min(cached_tokens, prompt_tokens)}
    return usage


def completion_body(
    completion_id: str,
    created: int,
    model: str,
    content: str,
    finish_reason: str,
    usage: dict[str, int],
    service_tier: str = "default",
) -> dict[str, Any]:
    """A non-streamed ``chat.completion`` object."""
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish_reason,
            }
        ],
        "service_tier": service_tier,
        "usage": usage,
    }


class ChunkEncoder:
    """Encodes the SSE events of one streamed completion as ``data: <json>\\n\\n`` bytes.

    When include_usage is set, every non-usage chunk carries ``"usage": null`` as
    OpenAI's does, and `usage` yields the final chunk with empty choices. Every chunk names
    the `service_tier` served, as OpenAI's do.
    """

    def __init__(self, completion_id: str, created: int, model: str, include_usage: bool,
                 service_tier: str = "default") -> None:
        self._head: dict[str, Any] = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "service_tier": service_tier,
        }
        self._include_usage = include_usage

    def role(self) -> bytes:
        """The opening chunk: the assistant role with empty content."""
        return self._choice({"role": "assistant", "content": ""}, None)

    def token(self, text: str) -> bytes:
        """A chunk carrying one token of content."""
        return self._choice({"content": text}, None)

    def finish(self, finish_reason: str) -> bytes:
        """The closing chunk: empty delta and the finish reason."""
        return self._choice({}, finish_reason)

    def usage(self, usage: dict[str, int]) -> bytes:
        """The usage chunk: no choices, only ``usage``."""
        return _event({**self._head, "choices": [], "usage": usage})

    def decorate(self, choice: dict[str, Any]) -> dict[str, Any]:
        """The streamed choice as sent: OpenAI's as it is; a cloud's subclass adds its fields."""
        return choice

    def _choice(self, delta: dict[str, str], finish_reason: str | None) -> bytes:
        choice = self.decorate({"index": 0, "delta": delta, "finish_reason": finish_reason})
        chunk = {**self._head, "choices": [choice]}
        if self._include_usage:
            chunk["usage"] = None
        return _event(chunk)


def _event(payload: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(payload) + b"\n\n"


def error_type(status: int) -> str:
    """OpenAI's error `type` for an HTTP status."""
    if status >= 500:
        return "server_error"
    if status == 429:
        return "rate_limit_error"
    return "invalid_request_error"


def error_response(
    status: int, message: str, *, code: str | None = None, headers: dict[str, str] | None = None
) -> web.Response:
    """An OpenAI-style error: ``{"error": {"message", "type", "code", "param"}}``."""
    body = error_body(status, message, code=code)
    return web.Response(
        status=status, body=orjson.dumps(body), content_type="application/json", headers=headers
    )


def error_body(status: int, message: str, *, code: str | None = None, param: str | None = None) -> dict[str, Any]:
    """The JSON body of an OpenAI-style error (what a batch line's failed response carries too)."""
    return {"error": {"message": message, "type": error_type(status), "code": code, "param": param}}


def json_response(payload: dict[str, Any]) -> web.Response:
    """A 200 response with `payload` as its JSON body."""
    return web.Response(body=orjson.dumps(payload), content_type="application/json")
