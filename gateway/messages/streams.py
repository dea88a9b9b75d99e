"""Messages' billed stream (a `gateway.streaming.BilledRelay`): Anthropic events relayed one by
one, whether the provider sent them or they were translated from chat; the closing message_delta,
carrying the cost, is sent once the charge is recorded."""

from typing import Any

from aiohttp import web

from gateway.billing.pricing import Cost, cost_body
from gateway.providers.usage import Usage
from gateway.catalogue import Resolved
from gateway.edge.errors import ANTHROPIC_ROOT, ApiError
from gateway.edge.sse import event_frame
from gateway.jsonio import encode
from gateway.messages.request import MessagesRequest
from gateway.providers.capabilities import MessageEvents
from gateway.services import Caller, Services
from gateway.streaming import BilledRelay

ROUTE = ANTHROPIC_ROOT  # where Anthropic's SDK posts, and so where its error shape is spoken
MESSAGE_STOP = event_frame("message_stop", b'{"type":"message_stop"}')


class MessagesRelay(BilledRelay[MessageEvents]):
    """Relays events to the client one by one (billed by BilledRelay's rule); the closing
    message_delta and message_stop are held back until the charge is committed, and
    message_delta then carries the cost."""

    route = ROUTE

    def __init__(self, services: Services, caller: Caller, request: MessagesRequest, model: Resolved,
                 upstream: MessageEvents, prompt: list[dict], byok: bool) -> None:
        super().__init__(services, caller, request, model, upstream, prompt, byok)
        self.closing: dict[str, Any] = {"type": "message_delta",
                                        "delta": {"stop_reason": "end_turn", "stop_sequence": None}, "usage": {}}

    async def _relay(self, response: web.StreamResponse) -> None:
        async for event in self.upstream:
            if event.name == "message_delta":
                self.closing, self.usage = event.data, event.usage or self.usage
            elif event.name != "message_stop":
                await response.write(event.frame)
                self.delivered += event.tokens
                if event.tokens:
                    self.text.add((event.data.get("delta") or {}).get("text") or "")

    async def _finish(self, response: web.StreamResponse, usage: Usage, cost: Cost) -> None:
        closing = {**self.closing, "usage": {**(self.closing.get("usage") or {}), **cost_body(cost)}}
        await response.write(event_frame("message_delta", encode(closing)))
        await response.write(MESSAGE_STOP)
        await response.write_eof()

    def _error_frames(self, error: ApiError) -> bytes:
        return event_frame("error", encode(error.anthropic_body(self.caller.request_id)))  # Anthropic's error event
