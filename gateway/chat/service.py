"""Chat completions: validate, pick the provider, call it once, bill the usage, relay."""

from collections.abc import Callable
from typing import TYPE_CHECKING

from aiohttp import web

from gateway.edge import sse
from gateway.billing import ceilings
from gateway.billing.charging import bill
from gateway.billing.pricing import Cost, Usage, usage_body
from gateway.catalogue import Resolved
from gateway.chat.request import ChatRequest
from gateway.edge.errors import ApiError, bad_request
from gateway.jsonio import encode
from gateway.providers.base import ChatCall, ChatStream
from gateway.providers.capabilities import ChatProvider
from gateway.streaming import BilledRelay
from gateway.resolution import CHAT, Served
from gateway.routing import failover
from gateway.services import Caller, Services

if TYPE_CHECKING:  # completions streams through this relay; it imports this module
    from gateway.chat.completions import CompletionRequest

ROUTE = "/v1/chat/completions"


def with_token_limit(request: ChatRequest) -> Callable[[list[Served[ChatProvider]]], list[Served[ChatProvider]]]:
    """The providers that can take `request`: without max_tokens, those that do not demand it;
    400 before any upstream call when every one does (spec 7: Anthropic)."""
    def usable(candidates: list[Served[ChatProvider]]) -> list[Served[ChatProvider]]:
        if request.max_tokens is not None or request.max_completion_tokens is not None:
            return candidates
        if kept := [served for served in candidates if not served.provider.requires_max_tokens]:
            return kept
        raise bad_request(f"max_tokens is required for model {request.model!r}: its provider"
                          f" ({candidates[0].model.provider_id}) refuses requests without it", "max_tokens")
    return usable


def ceiling(services: Services, body: dict) -> Callable[[Resolved], int]:
    """The worst case of a chat `body` on each provider it is tried on: the body as its prompt,
    and the output the body lets that provider write as its adapter sends it (limits translated,
    `n` forwarded or not)."""
    return ceilings.sent(services, body, lambda model: services.providers.chat[model.provider_id].chat_allowance(body))


def prompt_text(request: ChatRequest) -> list[dict]:
    """The conversation as retained in the content store."""
    return [{"role": m.role, "content": m.content} for m in request.messages]


def chat_call(caller: Caller, body: dict, served: Served, api_key: str) -> ChatCall:
    """The call upstream to the provider of `served`, with the organization's own key if it has one."""
    return ChatCall(caller.request_id, served.model.upstream_model, body, api_key)


async def complete(services: Services, caller: Caller, body: dict, request: ChatRequest) -> dict:
    """A non-streamed completion from the first provider that answers, billed before it is returned."""
    answered = await failover.routed(
        services, caller, body, request.model, CHAT,
        lambda served, key: served.provider.chat(chat_call(caller, body, served, key)),
        path=ROUTE, ceiling=ceiling(services, body), usable=with_token_limit(request))
    reply = answered.answer
    answer = [c.get("message", {}).get("content") for c in reply.body.get("choices") or ()]
    cost = await bill(services, caller, ROUTE, answered.served.model, reply.usage,
                      {"request": prompt_text(request), "response": answer}, byok=answered.byok)
    reply.body["usage"] = {**(reply.body.get("usage") or {}), **usage_body(reply.usage, cost)}
    return reply.body


async def open_stream(services: Services, caller: Caller, body: dict, request: ChatRequest) -> "StreamRelay":
    """Start a streamed completion with the first provider that accepts it; errors before then
    are ordinary error responses."""
    answered = await failover.routed(
        services, caller, body, request.model, CHAT,
        lambda served, key: served.provider.open_chat_stream(chat_call(caller, body, served, key)),
        path=ROUTE, ceiling=ceiling(services, body), stream=True, usable=with_token_limit(request))
    return StreamRelay(services, caller, request, answered.served.model, answered.answer, prompt_text(request),
                       byok=answered.byok)


class StreamRelay(BilledRelay[ChatStream]):
    """Relays upstream chunks to the client one by one, then bills (BilledRelay's rule) and
    sends the usage, when the client asked for it, in a last chunk carrying the cost. Text
    completions stream the same way (gateway.chat.completions), their chunks named and read apart."""

    route = ROUTE
    request: "ChatRequest | CompletionRequest"
    chunk_object = "chat.completion.chunk"  # a usage chunk's `object` when the provider sent none

    def __init__(self, services: Services, caller: Caller, request: "ChatRequest | CompletionRequest",
                 model: Resolved, upstream: ChatStream, prompt: list[dict], byok: bool) -> None:
        super().__init__(services, caller, request, model, upstream, prompt, byok)
        self.usage_chunk: dict | None = None  # the provider's, whose id and model the client's keeps

    @staticmethod
    def _texts(chunk: dict) -> list[str]:
        """The text a chunk delivered, for the content store."""
        return [(c.get("delta") or {}).get("content") or "" for c in chunk.get("choices") or ()]

    async def _relay(self, response: web.StreamResponse) -> None:
        async for chunk in self.upstream:
            if chunk.usage is not None:
                self.usage, self.usage_chunk = chunk.usage, chunk.parsed
                continue
            await response.write(sse.frame(chunk.data))
            self.delivered += chunk.tokens
            for text in self._texts(chunk.parsed):
                self.text.add(text)

    async def _finish(self, response: web.StreamResponse, usage: Usage, cost: Cost) -> None:
        options = self.request.stream_options
        if options and options.include_usage:
            chunk = {**(self.usage_chunk or {"object": self.chunk_object, "choices": []}),
                     "usage": usage_body(usage, cost)}
            await response.write(sse.frame(encode(chunk)))
        await response.write(sse.DONE)
        await response.write_eof()

    def _error_frames(self, error: ApiError) -> bytes:
        return sse.frame(encode(error.body())) + sse.DONE
