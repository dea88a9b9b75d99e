"""POST /v1/messages: Anthropic's Messages API in front of every chat model (spec 4.7).

Models of a provider that speaks it natively (an adapter in `Providers.messages`) get the
client's body as it is, and their answer and events come back as they are. Other models get the request
translated into OpenAI chat and their answer translated back (`wire`). Billing and
recording are those of chat: one RequestCompleted per request, failures not charged, a client
that leaves mid-stream billed for what it was sent. A stream is relayed by `streams`.
"""

import functools
from collections.abc import AsyncIterator, Callable

import msgspec

from gateway.messages import wire
from gateway.billing import ceilings
from gateway.billing.charging import bill
from gateway.billing.pricing import Cost, cost_body
from gateway.providers.usage import Usage
from gateway.catalogue import Resolved
from gateway.chat.service import chat_call
from gateway.messages.request import MessagesRequest
from gateway.messages.streams import ROUTE, MessagesRelay
from gateway.providers.anthropic.wire import MessageEvent
from gateway.providers.base import Allowance, ChatCall, ChatStream
from gateway.providers.capabilities import ChatProvider, MessageEvents, MessagesProvider
from gateway.resolution import CHAT, Served
from gateway.routing import failover
from gateway.services import Caller, Services


def conversation(request: MessagesRequest) -> list[dict]:
    """The conversation as retained in the content store (the system prompt first)."""
    system = [{"role": "system", "content": request.system}] if request.system else []
    return system + [{"role": m.role, "content": m.content} for m in request.messages]


class Sent:
    """What a request sends each provider: its body as it is to one that speaks the Messages API,
    its chat translation (made once, when first needed) to the others; and so its worst case."""

    def __init__(self, services: Services, body: dict) -> None:
        self.services, self.body = services, body

    @functools.cached_property
    def chat(self) -> dict:
        return wire.chat_body(self.body)

    def native(self, model: Resolved) -> MessagesProvider | None:
        return self.services.providers.messages.get(model.provider_id)

    def to(self, model: Resolved) -> dict:
        """The body `model`'s adapter is handed."""
        return self.body if self.native(model) is not None else self.chat

    def allowance(self, model: Resolved) -> Allowance:
        """The output the body, as sent to `model`'s provider, lets it write."""
        native, body = self.native(model), self.to(model)
        if native is not None:
            return native.messages_allowance(body)
        return self.services.providers.chat[model.provider_id].chat_allowance(body)

    def ceiling(self) -> Callable[[Resolved], int]:
        return ceilings.sent(self.services, self.body, self.allowance, self.body.get("service_tier"))


async def create(services: Services, caller: Caller, body: dict, request: MessagesRequest) -> dict:
    """A non-streamed message from the first provider that answers, billed before it is returned."""
    sent = Sent(services, body)
    answered = await failover.routed(
        services, caller, body, request.model, CHAT,
        lambda served, key: _ask(sent, served, chat_call(caller, body, served, key)), path=ROUTE,
        ceiling=sent.ceiling())
    message, usage = answered.answer

    def answer(cost: Cost) -> dict:
        return {**message, "usage": {**(message.get("usage") or {}), **cost_body(cost)}}

    cost = await bill(services, caller, ROUTE, answered.served.model, usage,
                      {"request": conversation(request), "response": [wire.message_text(message)]},
                      byok=answered.byok, answer=answer)
    return answer(cost)


async def _ask(sent: Sent, served: Served[ChatProvider], call: ChatCall) -> tuple[dict, Usage]:
    native = sent.native(served.model)
    if native is not None:
        reply = await native.messages(call)
        return reply.body, reply.usage
    reply = await served.provider.chat(msgspec.structs.replace(call, body=sent.to(served.model)))
    return wire.message(reply.body, reply.usage), reply.usage


async def open_stream(services: Services, caller: Caller, body: dict, request: MessagesRequest) -> MessagesRelay:
    """Start a streamed message with the first provider that accepts it; errors before then are
    ordinary error responses."""
    sent = Sent(services, body)
    answered = await failover.routed(
        services, caller, body, request.model, CHAT,
        lambda served, key: _open(sent, served, chat_call(caller, body, served, key), request.model),
        path=ROUTE, ceiling=sent.ceiling(), stream=True)
    return MessagesRelay(services, caller, request, answered.served.model, answered.answer, conversation(request),
                         byok=answered.byok)


async def _open(sent: Sent, served: Served[ChatProvider], call: ChatCall, model: str) -> MessageEvents:
    native = sent.native(served.model)
    if native is not None:
        return await native.open_messages_stream(call)
    chat = await served.provider.open_chat_stream(msgspec.structs.replace(call, body=sent.to(served.model)))
    return TranslatedStream(chat, model)


class TranslatedStream:
    """The OpenAI-shaped chat stream of another provider, as Anthropic events."""

    def __init__(self, upstream: ChatStream, model: str) -> None:
        self.upstream, self.model = upstream, model

    async def __aiter__(self) -> AsyncIterator[MessageEvent]:
        encoder, usage = wire.MessagesEventEncoder(self.model), None
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
