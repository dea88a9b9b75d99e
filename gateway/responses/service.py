"""POST /v1/responses for every chat model, billed exactly as chat is: one RequestCompleted per
request, failures not charged, a client that leaves mid-stream billed (499) for what it was sent.

A provider that speaks the Responses API (OpenAI: `Providers.responses`) gets the client's body
and its answer comes back as it is, with the gateway's id and cost. The others get the request
translated into chat (`translate`) and their answer translated back. Either way a continuation
(`previous_response_id`) reads the stored conversation (`store`) and sends it whole: no provider
ever saw the gateway's response ids.
"""

import time

from gateway.billing.charging import bill, failed
from gateway.billing.pricing import cost_body
from gateway.chat import chat_call
from gateway.errors import UpstreamError
from gateway.providers.base import ChatCall, ChatReply
from gateway.providers.capabilities import ChatProvider, ResponsesProvider
from gateway.resolution import CHAT, Served, resolve
from gateway.responses import store, translate
from gateway.responses.relay import NativeRelay, ResponsesRelay, TranslatedRelay
from gateway.responses.request import ResponsesRequest, check
from gateway.services import Caller, Services

ROUTE = store.ROUTE
# The output limit sent to a provider that demands one (Anthropic) when the client set none:
# Responses clients rarely send max_output_tokens, and a 400 for its absence would fail them all.
DEFAULT_MAX_OUTPUT_TOKENS = 4096


class Prepared:
    """One request made ready: its model and adapters, its conversation as input items, the call
    to make, and the id and time its answer carries."""

    def __init__(self, served: Served[ChatProvider], native: ResponsesProvider | None, items: list[dict],
                 call: ChatCall, body: dict, request: ResponsesRequest, response_id: str) -> None:
        self.served, self.native, self.items, self.call = served, native, items, call
        self.body, self.request, self.response_id, self.created_at = body, request, response_id, int(time.time())

    def answer(self, reply: ChatReply) -> dict:
        """The provider's answer as the client's `response` object (cost added after billing)."""
        if self.native is not None:
            return named(reply.body, self)
        return translate.response_object(reply.body, reply.usage, response_id=self.response_id,
                                         model=self.request.model, created_at=self.created_at, request=self.body)


def named(response: dict, ready: Prepared) -> dict:
    """A provider's response object under the gateway's id and the model the client named."""
    return {**response, "id": ready.response_id, "model": ready.request.model}


async def prepare(services: Services, caller: Caller, body: dict, request: ResponsesRequest) -> Prepared:
    """400/404 for what cannot be served, 402 without credit, all before any upstream call."""
    check(request)
    served = resolve(services, request.model, CHAT)
    history = await _history(services, caller, request.previous_response_id)
    items = [*history, *translate.input_items(body.get("input"), bool(history))]
    native = services.providers.responses.get(served.model.provider_id)
    sent = native_body(body, items, bool(history)) if native else translated_body(served, body, history)
    call = await chat_call(services, caller, sent, served.model)
    return Prepared(served, native, items, call, body, request, store.response_id(caller.request_id))


async def _history(services: Services, caller: Caller, previous: str | None) -> list[dict]:
    if previous is None:
        return []
    return store.conversation(await store.stored(services, caller, previous, 400, "previous_response_id"))


def native_body(body: dict, items: list[dict], continued: bool) -> dict:
    """The client's body for a provider that speaks the Responses API: a continuation carries the
    whole conversation as its input instead of the gateway's previous_response_id."""
    sent = {name: value for name, value in body.items() if name != "previous_response_id"}
    return {**sent, "input": items} if continued else sent


def translated_body(served: Served[ChatProvider], body: dict, history: list[dict]) -> dict:
    chat = translate.chat_body(body, history)
    if served.provider.requires_max_tokens and "max_tokens" not in chat:
        chat["max_tokens"] = DEFAULT_MAX_OUTPUT_TOKENS
    return chat


async def create(services: Services, caller: Caller, body: dict, request: ResponsesRequest) -> dict:
    """A response, billed before it is returned."""
    ready = await prepare(services, caller, body, request)
    model = ready.served.model
    try:
        reply = await (ready.native.respond(ready.call) if ready.native else ready.served.provider.chat(ready.call))
    except UpstreamError as exc:
        raise await failed(services, caller, ROUTE, model, request.model, exc) from None
    response = ready.answer(reply)
    cost = await bill(services, caller, ROUTE, model, reply.usage, store.kept(ready.items, response, request.store),
                      byok=bool(ready.call.api_key))
    response["usage"] = {**response["usage"], **cost_body(cost)}
    return response


async def open_stream(services: Services, caller: Caller, body: dict, request: ResponsesRequest) -> ResponsesRelay:
    """Start a streamed response; errors before the first event are ordinary error responses."""
    ready = await prepare(services, caller, body, request)
    try:
        if ready.native is not None:
            return NativeRelay(services, caller, ready, await ready.native.open_response_stream(ready.call))
        return TranslatedRelay(services, caller, ready, await ready.served.provider.open_chat_stream(ready.call))
    except UpstreamError as exc:
        raise await failed(services, caller, ROUTE, ready.served.model, request.model, exc, stream=True) from None


async def retrieve(services: Services, caller: Caller, response_id: str) -> dict:
    """GET /v1/responses/{id}: the caller's stored response."""
    return (await store.stored(services, caller, response_id))["response"]
