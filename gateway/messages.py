"""POST /v1/messages: Anthropic's Messages API in front of every chat model (spec 4.7).

Models of a provider that speaks it natively ("messages" in its capabilities) get the client's
body as it is, and their answer and events come back as they are. Other models get the request
translated into OpenAI chat and their answer translated back (`messages_wire`). Billing and
recording are those of chat: one RequestCompleted per request, failures not charged, a client
that leaves mid-stream billed for what it was sent.
"""

import math
from collections.abc import AsyncIterator
from typing import Protocol

import msgspec
from aiohttp import web

from gateway import messages_wire as wire
from gateway.billing import Cost, Usage, cost_body
from gateway.catalogue import Resolved
from gateway.charges import Outcome, admit, record, record_failure
from gateway.chat import chat_cost, resolve_chat_model
from gateway.errors import ApiError, UpstreamError
from gateway.jsonio import encode
from gateway.messages_request import MessagesRequest
from gateway.providers.anthropic_wire import MessageEvent, event_frame
from gateway.providers.base import ChatCall, ChatStream, Provider
from gateway.relay import BilledRelay
from gateway.services import Caller, Services

ROUTE = "/v1/messages"
NATIVE = "messages"  # the capability of adapters that serve this route in their own format
MESSAGE_STOP = event_frame("message_stop", b'{"type":"message_stop"}')


def conversation(request: MessagesRequest) -> list[dict]:
    """The conversation as retained in the content store (the system prompt first)."""
    system = [{"role": "system", "content": request.system}] if request.system else []
    return system + [{"role": m.role, "content": m.content} for m in request.messages]


def estimate_prompt_tokens(request: MessagesRequest) -> int:
    """Used only when upstream never reported usage: about four characters a token."""
    chars = sum(len(m["content"]) if isinstance(m["content"], str) else len(encode(m["content"]))
                for m in conversation(request))
    return math.ceil(chars / 4)


async def create(services: Services, caller: Caller, body: dict, request: MessagesRequest) -> dict:
    """A non-streamed message, billed before it is returned."""
    model = resolve_chat_model(services, request.model)
    api_key = await admit(services, caller, model.provider_id)
    call = ChatCall(caller.request_id, model.upstream_model, body, api_key)
    try:
        message, usage = await _ask(services.providers[model.provider_id], call)
    except UpstreamError as exc:
        await record_failure(services, caller, ROUTE, model, exc, stream=request.stream)
        raise exc.to_api_error(model.provider_id, request.model) from None
    cost = chat_cost(services, model, usage)
    await record(services, caller, _outcome(model, request, 200, usage, cost, byok=bool(api_key)),
                 {"request": conversation(request), "response": [wire.message_text(message)]})
    return {**message, "usage": {**(message.get("usage") or {}), **cost_body(cost)}}


async def _ask(provider: Provider, call: ChatCall) -> tuple[dict, Usage]:
    # An adapter with the NATIVE capability also offers `messages` and `open_messages_stream`.
    if NATIVE in provider.capabilities:
        reply = await provider.messages(call)
        return reply.body, reply.usage
    reply = await provider.chat(msgspec.structs.replace(call, body=wire.chat_body(call.body)))
    return wire.message(reply.body, reply.usage), reply.usage


async def open_stream(services: Services, caller: Caller, body: dict, request: MessagesRequest) -> "MessagesRelay":
    """Start a streamed message; errors before the first event are ordinary error responses."""
    model = resolve_chat_model(services, request.model)
    api_key = await admit(services, caller, model.provider_id)
    call = ChatCall(caller.request_id, model.upstream_model, body, api_key)
    try:
        upstream = await _open(services.providers[model.provider_id], call, request.model)
    except UpstreamError as exc:
        await record_failure(services, caller, ROUTE, model, exc, stream=request.stream)
        raise exc.to_api_error(model.provider_id, request.model) from None
    return MessagesRelay(services, caller, request, model, upstream, byok=bool(api_key))


async def _open(provider: Provider, call: ChatCall, model: str) -> "MessageEvents":
    if NATIVE in provider.capabilities:
        return await provider.open_messages_stream(call)
    chat = await provider.open_chat_stream(msgspec.structs.replace(call, body=wire.chat_body(call.body)))
    return TranslatedStream(chat, model)


class MessageEvents(Protocol):
    """What the relay reads: Anthropic events, native or `TranslatedStream`'s."""

    def __aiter__(self) -> AsyncIterator[MessageEvent]:
        """Events as they arrive; raises UpstreamError if the provider fails mid-way."""

    async def aclose(self) -> None:
        """Stop reading and abandon the upstream request."""


class TranslatedStream:
    """The OpenAI-shaped chat stream of another provider, as Anthropic events."""

    def __init__(self, upstream: ChatStream, model: str) -> None:
        self.upstream, self.model = upstream, model

    async def __aiter__(self) -> AsyncIterator[MessageEvent]:
        encoder, usage = wire.EventEncoder(self.model), None
        async for chunk in self.upstream:
            if chunk.usage is not None:
                usage = chunk.usage
                continue
            for event in encoder.feed(chunk.parsed):
                yield event
        for event in encoder.finish(usage):
            yield event

    async def aclose(self) -> None:
        await self.upstream.aclose()


class MessagesRelay(BilledRelay):
    """Relays events to the client one by one; the closing message_delta and message_stop are
    held back until the charge is committed, and message_delta then carries the cost.

    Billing is StreamRelay's (chat): on the usage the provider reports; a client that leaves is
    billed for the output delivered plus an estimated prompt; a provider failure is not charged.
    """

    route = ROUTE

    def __init__(self, services: Services, caller: Caller, request: MessagesRequest,
                 model: Resolved, upstream: MessageEvents, byok: bool = False) -> None:
        self.services, self.caller, self.request = services, caller, request
        self.model, self.upstream, self.byok = model, upstream, byok
        self.delivered, self.usage, self.text = 0, None, []
        self.closing = {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                        "usage": {}}

    def _usage_unreported(self) -> bool:
        return self.usage is None

    async def _relay(self, response: web.StreamResponse) -> None:
        async for event in self.upstream:
            if event.name == "message_delta":
                self.closing, self.usage = event.data, event.usage or self.usage
            elif event.name != "message_stop":
                await response.write(event.frame)
                self.delivered += event.tokens
                if event.tokens:
                    self.text.append((event.data.get("delta") or {}).get("text") or "")

    async def _bill(self, status: int, *, estimated: bool) -> Cost:
        usage = self.usage if not estimated else Usage(estimate_prompt_tokens(self.request), self.delivered)
        cost = chat_cost(self.services, self.model, usage)
        outcome = _outcome(self.model, self.request, status, usage, cost, stream=True, byok=self.byok)
        await record(self.services, self.caller, outcome,
                     {"request": conversation(self.request), "response": ["".join(self.text)]})
        return cost

    async def _finish(self, response: web.StreamResponse, cost: Cost) -> None:
        closing = {**self.closing, "usage": {**(self.closing.get("usage") or {}), **cost_body(cost)}}
        await response.write(event_frame("message_delta", encode(closing)))
        await response.write(MESSAGE_STOP)
        await response.write_eof()

    def _error_frames(self, error: ApiError) -> bytes:
        return event_frame("error", encode({"type": "error", **error.body()}))  # Anthropic's error event


def _outcome(model: Resolved, request: MessagesRequest, status: int, usage: Usage, cost: Cost, *,
             stream: bool = False, byok: bool = False) -> Outcome:
    """Delivered requests are charged, unless the org paid the provider with its own key."""
    return Outcome(route=ROUTE, model=model.model_id, provider=model.provider_id, status=status,
                   stream=stream, usage=usage, cost=cost, charged=status in (200, 499) and not byok)
