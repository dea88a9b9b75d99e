"""An upstream's server-sent events, read one by one: the one place where what goes wrong in a
provider's stream becomes an UpstreamError. A read timeout is a 504 and a broken connection a
502; an event reporting the provider's failure (each protocol's `failure`: Anthropic's `error`
event, Gemini's `error` object, OpenAI's error chunk, a Responses `error`/`response.failed`) is
raised as that failure; and each of them leaves without the key its request carried, since
providers quote the key they received. `ReadAhead`: a translated stream read up to its first
chunk before it is handed on (Gemini's, Bedrock's).
"""

from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, AsyncIterator
from typing import ClassVar, Generic, TypeVar

import aiohttp

from gateway.edge import sse
from gateway.edge.errors import UpstreamError
from gateway.providers.base import Chunk
from gateway.providers.http import scrubbed

T = TypeVar("T")


class UpstreamEventStream(ABC, Generic[T]):
    """One protocol's stream: how an event's data reads (`parse`), which events report a failure
    (`failure`), and what each other event is to the gateway (`item`)."""

    provider: ClassVar[str]  # named in the stream's errors

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response
        self.ended = False  # the protocol's end marker came (OpenAI's [DONE]), not just the stream's end

    @abstractmethod
    def parse(self, data: bytes) -> dict | None:
        """An event's data as a JSON object of the protocol's shape (None: the end marker); else
        UpstreamError (502)."""

    @abstractmethod
    def failure(self, parsed: dict) -> UpstreamError | None:
        """The provider's failure that `parsed` reports, if it is an error event."""

    @abstractmethod
    def item(self, event: sse.SseEvent, parsed: dict) -> T:
        """What an event that is not a failure is to the gateway (it may still be a broken one: 502)."""

    async def items(self) -> AsyncIterator[T]:
        """Each event's item as it arrives, until the stream or its end marker ends it."""
        try:
            async for event in sse.events(self._response.content):
                if (parsed := self.parse(event.data)) is None:
                    self.ended = True
                    return
                if (failure := self.failure(parsed)) is not None:
                    raise failure
                yield self.item(event, parsed)
        except UpstreamError as exc:
            raise scrubbed(exc, self._response) from None  # an error event may quote the key sent
        except TimeoutError:
            raise UpstreamError(504, f"{self.provider} stopped streaming (read timeout)") from None
        except aiohttp.ClientError as exc:
            raise UpstreamError(502, f"{self.provider} stream broke off: {type(exc).__name__}") from None

    async def aclose(self) -> None:
        self._response.close()  # closing the connection is how an HTTP client cancels


class ReadAhead:
    """OpenAI chunks translated from a provider's stream (`_chunks`), read up to the first by
    `start` before the stream is handed on: a request the provider refuses in its first event
    fails there, before anything is relayed, and may still fail over."""

    _chunks: AsyncGenerator[Chunk, None]
    _first: Chunk | None = None

    async def start(self) -> None:
        try:
            self._first = await anext(self._chunks, None)
        except BaseException:  # refused, broken or cancelled: never leak the connection
            await self.aclose()
            raise

    async def __aiter__(self) -> AsyncIterator[Chunk]:
        if self._first is not None:
            yield self._first
        async for chunk in self._chunks:
            yield chunk

    async def aclose(self) -> None:
        await self._chunks.aclose()
