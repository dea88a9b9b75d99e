"""OpenAI's own Responses API (POST /v1/responses): the answer and the stream's events, checked.

A stream is read event by event: each is relayed as the provider sent it, with its text deltas
counted (one output token each, as chat's are), until `response.completed` or
`response.incomplete`, whose usage is what it is billed on. An `error` or `response.failed`
event, an event that is not JSON, or a stream that ends without its closing event is an
UpstreamError: recorded, never charged.
"""

from collections.abc import AsyncIterator
from typing import Any

import msgspec

from gateway.edge import sse
from gateway.edge.errors import UpstreamError
from gateway.jsonio import loads
from gateway.providers.base import Allowance, ChatCall, ChatReply, ResponseEvent, limit
from gateway.providers.http import read_json
from gateway.providers.openai.adapter import OpenAIProvider, responses_usage
from gateway.providers.stream import UpstreamEventStream

PROVIDER = "openai"
CLOSING = frozenset({"response.completed", "response.incomplete"})
FAILED = frozenset({"error", "response.failed"})
DELTAS = frozenset({"response.output_text.delta", "response.function_call_arguments.delta"})


class OpenAIResponse(msgspec.Struct):
    """The part of a response object the gateway reads; the rest is relayed as it is."""

    id: str
    output: list[dict[str, Any]]
    usage: dict[str, Any] | None = None


def response_reply(body: object) -> ChatReply:
    """A Responses answer as the gateway bills it; UpstreamError 502 when it is not one."""
    try:
        response = msgspec.convert(body, OpenAIResponse)
    except msgspec.ValidationError as exc:
        raise UpstreamError(502, f"openai sent a response that is not one: {exc}") from None
    assert isinstance(body, dict)  # a converted OpenAIResponse was an object
    return ChatReply(body, responses_usage(response.usage, body.get("service_tier")))


class OpenAIResponseStream(UpstreamEventStream[ResponseEvent]):
    """A streamed response's events until its closing one."""

    provider = PROVIDER

    async def __aiter__(self) -> AsyncIterator[ResponseEvent]:
        async for read in self.items():
            yield read
            if read.usage is not None:
                return
        raise UpstreamError(502, "openai ended the response stream before response.completed")

    def parse(self, data: bytes) -> dict:
        try:
            parsed = loads(data)
        except ValueError:
            raise UpstreamError(502, "openai sent a response event that is not JSON") from None
        if not isinstance(parsed.get("type") if isinstance(parsed, dict) else None, str):
            raise UpstreamError(502, "openai sent a response event without a type")
        return parsed

    def failure(self, parsed: dict) -> UpstreamError | None:
        if parsed["type"] not in FAILED:
            return None
        error = parsed.get("error") or (parsed.get("response") or {}).get("error") or parsed
        return UpstreamError(502, f"openai response failed: {error.get('message') or 'no message'}")

    def item(self, event: sse.SseEvent, parsed: dict) -> ResponseEvent:
        if parsed["type"] in CLOSING:
            return ResponseEvent(parsed, usage=response_reply(parsed.get("response")).usage)
        return ResponseEvent(parsed, tokens=1 if parsed["type"] in DELTAS else 0)


def request_body(call: ChatCall, stream: bool) -> dict:
    """What a Responses call sends: the client's body, addressed to the upstream model."""
    return {**call.body, "model": call.upstream_model, "stream": stream}


def allowance(body: dict) -> Allowance:
    """What a Responses body lets the model write: max_output_tokens (reasoning included), one answer."""
    return Allowance(limit(body.get("max_output_tokens")))


class OpenAIResponses:
    """The Responses API of an OpenAI adapter: its base URL, keys and timeouts."""

    def __init__(self, provider: OpenAIProvider) -> None:
        self.provider, self.id = provider, provider.id

    response_request = staticmethod(request_body)
    response_allowance = staticmethod(allowance)  # the body goes up as it is

    async def respond(self, call: ChatCall) -> ChatReply:
        """One response; raises UpstreamError on any provider failure."""
        response = await self.provider.send_json("/responses", request_body(call, False), call.api_key)
        return response_reply(await read_json(PROVIDER, response))

    async def open_response_stream(self, call: ChatCall) -> OpenAIResponseStream:
        """Start a streamed response; raises UpstreamError before any event if refused."""
        body = request_body(call, True)
        return OpenAIResponseStream(await self.provider.send_json("/responses", body, call.api_key))
