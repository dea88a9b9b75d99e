"""POST /v1/audio/speech: the audio is relayed to the client as the provider produces it.

Billing: the provider prices speech per input character (catalogue `pricing.prompt`, USD per
character; the count is recorded as prompt_tokens). A stream that completes is charged after
its last byte; a client that leaves mid-way is charged too (status 499), as the provider bills
the whole input it accepted. A provider failure before the first byte is an ordinary gateway
error; one after it cuts the client's connection (so the audio cannot pass for complete).
Neither is charged. Being priced by its input, speech is the one streamed answer whose cost is
known before its first byte: its response headers state it, and the charge equals it.
"""

import asyncio
from collections.abc import AsyncIterator
from typing import Annotated, Literal

import msgspec
from aiohttp import web

from gateway.billing import ceilings
from gateway.billing.charging import Outcome, bill, despite_cancellation, outcome, price, record_failure
from gateway.catalogue import Resolved
from gateway.edge.errors import UpstreamError
from gateway.providers.base import AudioStream, SpeechCall
from gateway.providers.capabilities import SpeechProvider
from gateway.resolution import SPEECH, Served
from gateway.routing import failover
from gateway.services import Caller, Services
from gateway.providers.usage import Usage

ROUTE = "/v1/audio/speech"
BODY_BYTES = 1024 * 1024
MAX_INPUT_CHARS = 4096


class SpeechRequest(msgspec.Struct):
    """The fields the gateway acts on; every other field passes through to upstream."""

    model: str
    input: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_INPUT_CHARS)]
    voice: Annotated[str, msgspec.Meta(min_length=1)] | dict[str, str]
    response_format: Literal["mp3", "opus", "aac", "flac", "wav", "pcm"] = "mp3"
    speed: Annotated[float, msgspec.Meta(ge=0.25, le=4.0)] = 1.0
    instructions: str | None = None
    stream_format: Literal["audio"] = "audio"  # raw audio bytes; SSE-wrapped audio is not relayed


async def open_speech(services: Services, caller: Caller, body: dict, request: SpeechRequest) -> "SpeechRelay":
    """Start the synthesis with the first provider whose first bytes arrive; failures until then
    are gateway errors."""
    answered = await failover.routed(
        services, caller, body, request.model, SPEECH, lambda served, key: _first_audio(served, SpeechCall(
            caller.request_id, served.model.upstream_model, body, key)),
        path=ROUTE, ceiling=lambda model: ceilings.tokens(services, model, len(request.input), 0), stream=True)
    upstream, chunks, first = answered.answer
    return SpeechRelay(services, caller, request, answered.served.model, upstream, chunks, first,
                       byok=answered.byok)


async def _first_audio(served: Served[SpeechProvider], call: SpeechCall
                       ) -> tuple[AudioStream, AsyncIterator[bytes], bytes]:
    """The provider's stream and its first bytes; UpstreamError (the stream closed) when they fail."""
    upstream = await served.provider.open_speech(call)
    chunks = aiter(upstream)
    try:
        return upstream, chunks, await anext(chunks, b"")
    except BaseException:
        await upstream.aclose()
        raise


class SpeechRelay:
    def __init__(self, services: Services, caller: Caller, request: SpeechRequest, model: Resolved,
                 upstream: AudioStream, chunks: AsyncIterator[bytes], first: bytes, byok: bool) -> None:
        self.services, self.caller, self.request, self.model = services, caller, request, model
        self.upstream, self.chunks, self.first, self.byok = upstream, chunks, first, byok

    @property
    def usage(self) -> Usage:
        return Usage(len(self.request.input))  # characters, the unit the price is per

    async def send(self, http_request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": self.upstream.content_type,
                                               "Cache-Control": "no-cache"})
        self.caller.facts.cost_headers = self._delivered().headers()  # sent with the first byte
        await response.prepare(http_request)
        try:
            await self._relay(response)
        except UpstreamError as exc:
            await record_failure(self.services, self.caller, ROUTE, self.model, exc, stream=True)
            _cut(http_request)
            return response
        except (ConnectionError, asyncio.CancelledError):
            await despite_cancellation(self._bill(499))  # the client went away
            raise
        finally:
            await self.upstream.aclose()
        await self._bill(200)
        await response.write_eof()
        return response

    async def _relay(self, response: web.StreamResponse) -> None:
        if self.first:
            await response.write(self.first)
        async for chunk in self.chunks:
            await response.write(chunk)

    def _delivered(self) -> Outcome:
        """The outcome once the audio is complete, priced as `bill` will price it."""
        return outcome(ROUTE, self.model, 200, self.usage, price(self.services, self.model, self.usage),
                       byok=self.byok, stream=True)

    async def _bill(self, status: int) -> None:
        await bill(self.services, self.caller, ROUTE, self.model, self.usage, {"request": self.request.input},
                   byok=self.byok, status=status, stream=True)


def _cut(http_request: web.Request) -> None:
    """Abort the client's connection: a chunked response that never ends shows it is incomplete."""
    if http_request.transport is not None:
        http_request.transport.abort()
