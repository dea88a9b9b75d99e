"""Chat's billed stream (a `gateway.streaming.BilledRelay`): OpenAI chunks relayed one by one, then
billed, then the usage chunk the client asked for. Text completions stream through it too
(gateway.chat.completions), their chunks named and read apart."""

from typing import Protocol

from aiohttp import web

from gateway.billing.pricing import Cost, usage_body
from gateway.catalogue import Resolved
from gateway.chat.request import StreamOptions
from gateway.edge import sse
from gateway.edge.errors import ApiError
from gateway.jsonio import encode
from gateway.providers.base import ChatStream
from gateway.services import Caller, Services
from gateway.streaming import BilledRelay, RelayedRequest
from gateway.providers.usage import Usage

ROUTE = "/v1/chat/completions"


class StreamedRequest(RelayedRequest, Protocol):
    """What the relay reads of a chat or text completion request (ChatRequest, CompletionRequest)."""

    @property
    def stream_options(self) -> StreamOptions | None: ...


class ChatRelay(BilledRelay[ChatStream]):
    """Relays upstream chunks to the client one by one, then bills (BilledRelay's rule) and
    sends the usage, when the client asked for it, in a last chunk carrying the cost."""

    route = ROUTE
    request: StreamedRequest
    chunk_object = "chat.completion.chunk"  # a usage chunk's `object` when the provider sent none

    def __init__(self, services: Services, caller: Caller, request: StreamedRequest,
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
