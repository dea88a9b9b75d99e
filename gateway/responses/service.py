"""POST /v1/responses for every chat model: the Responses request translated into chat
(`translate`), sent through the model's chat adapter, and its answer translated back, billed
exactly as chat is: one RequestCompleted per request, failures not charged, a client that leaves
mid-stream billed (499) for what it was sent (`gateway.relay.BilledRelay`).

Continuations (`previous_response_id`) read the stored conversation (`store`) and send it whole:
the provider never saw the gateway's response ids.
"""

import time

from aiohttp import web

from gateway.billing.charging import bill, failed
from gateway.billing.pricing import Cost, Usage, cost_body
from gateway.chat import chat_call
from gateway.errors import ApiError, UpstreamError
from gateway.jsonio import encode
from gateway.providers.base import ChatCall, ChatStream
from gateway.providers.capabilities import ChatProvider
from gateway.relay import BilledRelay
from gateway.resolution import CHAT, Served, resolve
from gateway.responses import store, translate
from gateway.responses.request import ResponsesRequest, check
from gateway.responses.translate_stream import EventEncoder
from gateway.services import Caller, Services
from gateway.sse import event_frame

ROUTE = store.ROUTE
# The output limit sent to a provider that demands one (Anthropic) when the client set none:
# Responses clients rarely send max_output_tokens, and a 400 for its absence would fail them all.
DEFAULT_MAX_OUTPUT_TOKENS = 4096


class Prepared:
    """One request made ready: its model and adapter, its conversation as input items, the chat
    call to make, and the ids its answer carries."""

    def __init__(self, served: Served[ChatProvider], items: list[dict], call: ChatCall, body: dict,
                 response_id: str) -> None:
        self.served, self.items, self.call, self.body = served, items, call, body
        self.response_id, self.created_at = response_id, int(time.time())


async def prepare(services: Services, caller: Caller, body: dict, request: ResponsesRequest) -> Prepared:
    """400/404 for what cannot be served, 402 without credit, all before any upstream call."""
    check(request)
    served = resolve(services, request.model, CHAT)
    history = await _history(services, caller, request.previous_response_id)
    chat = translate.chat_body(body, history)
    if served.provider.requires_max_tokens and "max_tokens" not in chat:
        chat["max_tokens"] = DEFAULT_MAX_OUTPUT_TOKENS
    items = [*history, *translate.input_items(body.get("input"), bool(history))]
    call = await chat_call(services, caller, chat, served.model)
    return Prepared(served, items, call, body, store.response_id(caller.request_id))


async def _history(services: Services, caller: Caller, previous: str | None) -> list[dict]:
    if previous is None:
        return []
    return store.conversation(await store.stored(services, caller, previous, 400, "previous_response_id"))


async def create(services: Services, caller: Caller, body: dict, request: ResponsesRequest) -> dict:
    """A response, billed before it is returned."""
    ready = await prepare(services, caller, body, request)
    model = ready.served.model
    try:
        reply = await ready.served.provider.chat(ready.call)
    except UpstreamError as exc:
        raise await failed(services, caller, ROUTE, model, request.model, exc) from None
    response = translate.response_object(reply.body, reply.usage, response_id=ready.response_id,
                                         model=request.model, created_at=ready.created_at, request=body)
    cost = await bill(services, caller, ROUTE, model, reply.usage, store.kept(ready.items, response),
                      byok=bool(ready.call.api_key))
    response["usage"].update(cost_body(cost))
    return response


async def open_stream(services: Services, caller: Caller, body: dict, request: ResponsesRequest) -> "StreamRelay":
    """Start a streamed response; errors before the first event are ordinary error responses."""
    ready = await prepare(services, caller, body, request)
    try:
        upstream = await ready.served.provider.open_chat_stream(ready.call)
    except UpstreamError as exc:
        raise await failed(services, caller, ROUTE, ready.served.model, request.model, exc, stream=True) from None
    return StreamRelay(services, caller, request, ready, upstream)


class StreamRelay(BilledRelay[ChatStream]):
    """Chat chunks relayed as Responses events as they arrive; billed by BilledRelay's rule, the
    usage and cost carried by the closing `response.completed`."""

    route = ROUTE

    def __init__(self, services: Services, caller: Caller, request: ResponsesRequest, ready: Prepared,
                 upstream: ChatStream) -> None:
        super().__init__(services, caller, request, ready.served.model, upstream, ready.call.body["messages"],
                         byok=bool(ready.call.api_key))
        self.items = ready.items
        self.events = EventEncoder(response_id=ready.response_id, model=request.model,
                                   created_at=ready.created_at, request=ready.body)
        self.closing: list[dict] = []

    async def _relay(self, response: web.StreamResponse) -> None:
        await response.write(frames(self.events.opening()))
        async for chunk in self.upstream:
            if chunk.usage is not None:
                self.usage = chunk.usage
                continue
            await response.write(frames(self.events.feed(chunk.parsed)))
            self.delivered += chunk.tokens

    def _kept(self, usage: Usage) -> dict:
        """The response as it ends (closed here, once, so what is kept is what is sent)."""
        self.closing = self.events.closing(usage, None)
        return store.kept(self.items, self.closing[-1]["response"])

    async def _finish(self, response: web.StreamResponse, usage: Usage, cost: Cost) -> None:
        self.closing[-1]["response"]["usage"].update(cost_body(cost))
        await response.write(frames(self.closing))
        await response.write_eof()

    def _error_frames(self, error: ApiError) -> bytes:
        event = {"type": "error", "code": error.code, "message": error.message, "param": error.param,
                 "sequence_number": self.events.sequence_number}
        return event_frame("error", encode(event))


def frames(events: list[dict]) -> bytes:
    return b"".join(event_frame(event["type"], encode(event)) for event in events)


async def retrieve(services: Services, caller: Caller, response_id: str) -> dict:
    """GET /v1/responses/{id}: the caller's stored response."""
    return (await store.stored(services, caller, response_id))["response"]
