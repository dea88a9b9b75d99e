"""POST /v1/responses for every chat model, billed exactly as chat is: one RequestCompleted per
request, failures not charged, a client that leaves mid-stream billed (499) for what it was sent.

A provider that speaks the Responses API (OpenAI: `Providers.responses`) gets the client's body
and its answer comes back as it is, with the gateway's id and cost. The others get the request
translated into chat (`translate`) and their answer translated back. Either way a continuation
(`previous_response_id`) reads the stored conversation (`store`) and sends it whole: no provider
ever saw the gateway's response ids.
"""

import functools
from collections.abc import Callable

from gateway.billing import ceilings
from gateway.billing.charging import bill
from gateway.catalogue import Resolved
from gateway.billing.pricing import Cost, cost_body
from gateway.chat.service import chat_call
from gateway.providers.base import Allowance, ChatReply
from gateway.providers.capabilities import ChatProvider, ResponsesProvider
from gateway.resolution import CHAT, Served
from gateway.routing import failover
from gateway.routing.router import Plan
from gateway.responses import store, translate
from gateway.responses.prepared import Prepared
from gateway.responses.streams import NativeResponsesRelay, ResponsesRelay, TranslatedResponsesRelay
from gateway.responses.request import ResponsesRequest, check
from gateway.services import Caller, Services

ROUTE = store.ROUTE
# The output limit sent to a provider that demands one (Anthropic) when the client set none:
# Responses clients rarely send max_output_tokens, and a 400 for its absence would fail them all.
DEFAULT_MAX_OUTPUT_TOKENS = 4096


class Conversation:
    """A request's providers, in order, and its conversation; what each provider is sent (the
    chat translation made once, when first needed), and so the request's worst case."""

    def __init__(self, services: Services, route: Plan[Served[ChatProvider]], body: dict, history: list[dict],
                 items: list[dict]) -> None:
        self.services, self.route, self.body, self.history, self.items = services, route, body, history, items

    @functools.cached_property
    def chat(self) -> dict:
        return translate.chat_body(self.body, self.history)

    def native(self, model: Resolved) -> ResponsesProvider | None:
        return self.services.providers.responses.get(model.provider_id)

    def sent(self, model: Resolved) -> dict:
        """The body `model`'s provider is sent: natively, or translated into chat (with an output
        limit for a provider that demands one)."""
        if self.native(model) is not None:
            return native_body(self.body, self.items, bool(self.history))
        adapter = self.services.providers.chat[model.provider_id]
        if adapter.requires_max_tokens(model.upstream_model) and "max_tokens" not in self.chat:
            return {**self.chat, "max_tokens": DEFAULT_MAX_OUTPUT_TOKENS}
        return self.chat

    def allowance(self, model: Resolved) -> Allowance:
        """The output the body, as sent to `model`'s provider, lets it write."""
        native, body = self.native(model), self.sent(model)
        if native is not None:
            return native.response_allowance(body)
        return self.services.providers.chat[model.provider_id].chat_allowance(body)

    def ceiling(self) -> Callable[[Resolved], int]:
        """The request's worst case on a model: the body and the history it continues as its prompt."""
        return ceilings.sent(self.services, [self.body, self.history], self.allowance, self.body.get("service_tier"))

    def ready(self, caller: Caller, served: Served[ChatProvider], api_key: str, request: ResponsesRequest
              ) -> Prepared:
        """The call for `served`: natively, or translated into chat."""
        call = chat_call(caller, self.sent(served.model), served, api_key)
        return Prepared(served, self.native(served.model), self.items, call, self.body, request,
                        store.response_id(caller.request_id))


async def prepare(services: Services, caller: Caller, body: dict, request: ResponsesRequest) -> Conversation:
    """400/404 for what cannot be served, all before any upstream call."""
    check(request)
    route = await failover.plan(services, body, request.model, CHAT)
    history = await _history(services, caller, request.previous_response_id)
    items = [*history, *translate.input_items(body.get("input"), bool(history))]
    return Conversation(services, route, body, history, items)


async def _history(services: Services, caller: Caller, previous: str | None) -> list[dict]:
    if previous is None:
        return []
    return store.conversation(await store.stored(services, caller, previous, 400, "previous_response_id"))


def native_body(body: dict, items: list[dict], continued: bool) -> dict:
    """The client's body for a provider that speaks the Responses API: a continuation carries the
    whole conversation as its input instead of the gateway's previous_response_id."""
    sent = {name: value for name, value in body.items() if name != "previous_response_id"}
    return {**sent, "input": items} if continued else sent


async def create(services: Services, caller: Caller, body: dict, request: ResponsesRequest) -> dict:
    """A response from the first provider that answers, billed before it is returned."""
    conversation = await prepare(services, caller, body, request)

    async def ask(served: Served[ChatProvider], api_key: str) -> tuple[Prepared, ChatReply]:
        ready = conversation.ready(caller, served, api_key, request)
        return ready, await (ready.native.respond(ready.call) if ready.native else served.provider.chat(ready.call))

    answered = await failover.answer(services, caller, conversation.route, ask, path=ROUTE, model=request.model,
                                     ceiling=conversation.ceiling())
    ready, reply = answered.answer
    response = ready.answer(reply)

    def answer(cost: Cost) -> dict:
        return {**response, "usage": {**response["usage"], **cost_body(cost)}}

    cost = await bill(services, caller, ROUTE, answered.served.model, reply.usage,
                      store.kept(ready.items, response, request.store), byok=answered.byok, answer=answer)
    return answer(cost)


async def open_stream(services: Services, caller: Caller, body: dict, request: ResponsesRequest) -> ResponsesRelay:
    """Start a streamed response with the first provider that accepts it; errors before then are
    ordinary error responses."""
    conversation = await prepare(services, caller, body, request)

    async def start(served: Served[ChatProvider], api_key: str) -> ResponsesRelay:
        ready = conversation.ready(caller, served, api_key, request)
        if ready.native is not None:
            return NativeResponsesRelay(services, caller, ready, await ready.native.open_response_stream(ready.call))
        return TranslatedResponsesRelay(services, caller, ready, await served.provider.open_chat_stream(ready.call))

    answered = await failover.answer(services, caller, conversation.route, start, path=ROUTE, model=request.model,
                                     ceiling=conversation.ceiling(), stream=True)
    return answered.answer


async def retrieve(services: Services, caller: Caller, response_id: str) -> dict:
    """GET /v1/responses/{id}: the caller's stored response."""
    return (await store.stored(services, caller, response_id))["response"]
