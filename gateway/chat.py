"""Chat completions: validate, pick the provider, call it once, bill the usage, relay."""

from typing import TYPE_CHECKING

from aiohttp import web

from gateway import sse
from gateway.billing.charging import admit, bill, failed
from gateway.billing.pricing import Cost, Usage, usage_body
from gateway.catalogue import Resolved
from gateway.chat_request import ChatRequest
from gateway.errors import ApiError, UpstreamError, bad_request
from gateway.jsonio import encode
from gateway.providers.base import ChatCall, ChatStream
from gateway.providers.capabilities import ChatProvider
from gateway.relay import BilledRelay
from gateway.resolution import CHAT, Served, resolve
from gateway.services import Caller, Services

if TYPE_CHECKING:  # completions streams through this relay; it imports this module
    from gateway.completions import CompletionRequest

ROUTE = "/v1/chat/completions"


def require_max_tokens(served: Served[ChatProvider], request: ChatRequest) -> None:
    """400 before any upstream call when the model's provider demands a token limit (spec 7)."""
    if served.provider.requires_max_tokens and \
            request.max_tokens is None and request.max_completion_tokens is None:
        raise bad_request(f"max_tokens is required for model {request.model!r}: its provider"
                          f" ({served.model.provider_id}) refuses requests without it", "max_tokens")


def prompt_text(request: ChatRequest) -> list[dict]:
    """The conversation as retained in the content store."""
    return [{"role": m.role, "content": m.content} for m in request.messages]


async def upstream_call(services: Services, caller: Caller, body: dict, request: ChatRequest
                        ) -> tuple[Served[ChatProvider], ChatCall]:
    """The model and adapter the request names, and the call to make (400, 501, or 402 unless
    the request is paid for, before any upstream call)."""
    served = resolve(services, request.model, CHAT)
    require_max_tokens(served, request)
    return served, await chat_call(services, caller, body, served.model)


async def chat_call(services: Services, caller: Caller, body: dict, model: Resolved) -> ChatCall:
    """The call upstream, with the organization's own key if it has one (else 402 without credit)."""
    api_key = await admit(services, caller, model.provider_id)
    return ChatCall(caller.request_id, model.upstream_model, body, api_key)


async def complete(services: Services, caller: Caller, body: dict, request: ChatRequest) -> dict:
    """A non-streamed completion, billed before it is returned."""
    served, call = await upstream_call(services, caller, body, request)
    model = served.model
    try:
        reply = await served.provider.chat(call)
    except UpstreamError as exc:
        raise await failed(services, caller, ROUTE, model, request.model, exc) from None
    answer = [c.get("message", {}).get("content") for c in reply.body.get("choices") or ()]
    cost = await bill(services, caller, ROUTE, model, reply.usage,
                      {"request": prompt_text(request), "response": answer}, byok=bool(call.api_key))
    reply.body["usage"] = {**(reply.body.get("usage") or {}), **usage_body(reply.usage, cost)}
    return reply.body


async def open_stream(services: Services, caller: Caller, body: dict, request: ChatRequest) -> "StreamRelay":
    """Start a streamed completion; errors before the first chunk are ordinary error responses."""
    served, call = await upstream_call(services, caller, body, request)
    try:
        upstream = await served.provider.open_chat_stream(call)
    except UpstreamError as exc:
        raise await failed(services, caller, ROUTE, served.model, request.model, exc, stream=True) from None
    return StreamRelay(services, caller, request, served.model, upstream, prompt_text(request),
                       byok=bool(call.api_key))


class StreamRelay(BilledRelay[ChatStream]):
    """Relays upstream chunks to the client one by one, then bills (BilledRelay's rule) and
    sends the usage, when the client asked for it, in a last chunk carrying the cost. Text
    completions stream the same way (gateway.completions), their chunks named and read apart."""

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
            self.text.extend(self._texts(chunk.parsed))

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
