"""Streamed responses: events relayed as they arrive, billed by `gateway.streaming.BilledRelay`'s rule,
the usage and cost carried by the closing `response.completed` (held back until the charge is
recorded). A provider failure mid-way ends the stream with an `error` event, numbered on."""

from aiohttp import web

from gateway.billing.pricing import Cost, cost_body
from gateway.providers.usage import Usage
from gateway.edge.errors import ApiError
from gateway import content
from gateway.jsonio import encode
from gateway.accounts.keys import new_id
from gateway.providers.base import ChatStream
from gateway.providers.capabilities import ResponseEvents
from gateway.streaming import BilledRelay, U
from gateway.responses import store
from gateway.responses.prepared import Prepared
from gateway.responses.translate import message_item, response_resource
from gateway.responses.translate_stream import ResponsesEventEncoder
from gateway.services import Caller, Services
from gateway.edge.sse import event_frame


def frames(events: list[dict]) -> bytes:
    return b"".join(event_frame(event["type"], encode(event)) for event in events)


class ResponsesRelay(BilledRelay[U]):
    route = store.ROUTE

    def __init__(self, services: Services, caller: Caller, ready: Prepared, upstream: U) -> None:
        # What a usage the provider never reported is estimated from: the chat messages sent, or
        # (natively) the input items, measured as JSON.
        prompt = ready.call.body.get("messages") or [{"role": "user", "content": ready.items}]
        super().__init__(services, caller, ready.request, ready.served.model, upstream, prompt,
                         byok=bool(ready.call.api_key))
        self.ready = ready
        self.closing: list[dict] = []  # the events that end the stream, the response.completed last
        self.sequence_number = 0  # the next event's

    async def _finish(self, response: web.StreamResponse, usage: Usage, cost: Cost) -> None:
        final = self.closing[-1]["response"]
        final["usage"] = {**final["usage"], **cost_body(cost)}
        await response.write(frames(self.closing))
        await response.write_eof()

    def _error_frames(self, error: ApiError) -> bytes:
        event = {"type": "error", "code": error.code, "message": error.message, "param": error.param,
                 "sequence_number": self.sequence_number}
        return event_frame("error", encode(event))


class TranslatedResponsesRelay(ResponsesRelay[ChatStream]):
    """Chat chunks in, Responses events out (`translate_stream.ResponsesEventEncoder`)."""

    def __init__(self, services: Services, caller: Caller, ready: Prepared, upstream: ChatStream) -> None:
        super().__init__(services, caller, ready, upstream)
        self.events = ResponsesEventEncoder(response_id=ready.response_id, model=ready.request.model,
                                   created_at=ready.created_at, request=ready.body)

    async def _relay(self, response: web.StreamResponse) -> None:
        await self._write(response, self.events.opening())
        async for chunk in self.upstream:
            if chunk.usage is not None:
                self.usage = chunk.usage
                continue
            await self._write(response, self.events.feed(chunk.parsed))
            self.delivered += chunk.tokens

    async def _write(self, response: web.StreamResponse, events: list[dict]) -> None:
        await response.write(frames(events))
        self.sequence_number = self.events.sequence_number

    def _kept(self, usage: Usage) -> dict:
        """The response as it ends (closed here, once, so what is kept is what is sent)."""
        self.closing = self.events.closing(usage, None)
        kept = store.kept(self.ready.items, self.closing[-1]["response"], self.ready.request.store)
        return content.marked(kept, self.events.truncated)


class NativeResponsesRelay(ResponsesRelay[ResponseEvents]):
    """The provider's own events, relayed under the gateway's response id."""

    async def _relay(self, response: web.StreamResponse) -> None:
        async for event in self.upstream:
            parsed = self._named(event.parsed)
            if event.usage is not None:
                self.usage, self.closing = event.usage, [parsed]
                continue
            await response.write(event_frame(parsed["type"], encode(parsed)))
            self.sequence_number = (parsed.get("sequence_number") or self.sequence_number) + 1
            self.delivered += event.tokens
            if parsed["type"] == "response.output_text.delta":
                self.text.add(str(parsed.get("delta") or ""))

    def _named(self, event: dict) -> dict:
        """`event` with its response object (if it carries one) under the gateway's id and model."""
        if isinstance(response := event.get("response"), dict):
            return {**event, "response": {**response, "id": self.ready.response_id, "model": self.ready.request.model}}
        return event

    def _kept(self, usage: Usage) -> dict:
        """The closing response, or, for a client that left before it, what it was sent."""
        if self.closing:
            return store.kept(self.ready.items, self.closing[-1]["response"], self.ready.request.store)
        ready = self.ready
        sent = response_resource(ready.body, response_id=ready.response_id, model=ready.request.model,
                                 created_at=ready.created_at, output=[message_item(new_id("msg"), self.text.text())],
                                 usage=usage, finish_reason=None)
        return self.text.marked(store.kept(ready.items, sent, ready.request.store))
