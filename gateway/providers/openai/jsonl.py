"""The HTTP a batch API needs beside the adapters' calls (gateway.providers.http; its files are JSON
Lines): JSON Lines read one line at a time, and a body produced while it
is sent whose producer's own failure is told apart from the provider's. The anthropic
protocol's Message Batches read and send through here too."""

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

import aiohttp
from aiohttp.http_exceptions import LineTooLong

from gateway.edge.errors import UpstreamError
from gateway.jsonio import loads
from gateway.providers.http import MESSAGE_CHARS

# The longest result line read: far above any answer a line holds (a long embeddings line is a
# few MB), far below what a broken upstream could make the gateway buffer.
MAX_LINE_BYTES = 64 * 1024 * 1024

Sent = TypeVar("Sent")


async def records(provider: str, response: aiohttp.ClientResponse) -> AsyncIterator[dict]:
    """Each line of a JSON Lines body as a JSON object, read as it arrives (blank lines skipped);
    a line that is not one, or a body broken off, is UpstreamError. The response is released."""
    async with response:
        while line := await _line(provider, response):
            if line.strip():
                yield _record(provider, line)


async def _line(provider: str, response: aiohttp.ClientResponse) -> bytes:
    try:
        return await response.content.readline(max_line_length=MAX_LINE_BYTES)
    except TimeoutError:
        raise UpstreamError(504, f"{provider} stopped sending a results file") from None
    except LineTooLong:
        raise UpstreamError(502, f"{provider} sent a results line over {MAX_LINE_BYTES} bytes") from None
    except aiohttp.ClientError as exc:
        raise UpstreamError(502, f"{provider} results file broke off: {type(exc).__name__}") from None


def _record(provider: str, line: bytes) -> dict:
    try:
        record = loads(line)
    except ValueError:
        raise UpstreamError(502, f"{provider} sent a results line that is not JSON") from None
    if not isinstance(record, dict):
        raise UpstreamError(502, f"{provider} sent a results line that is not a JSON object")
    return record


def cut(message: object) -> str:
    """A provider's error message for one line, cut short as `http.scrubbed` cuts one."""
    return str(message or "no message")[:MESSAGE_CHARS]


class Source:
    """An upload's chunks, remembering what stopped them if their producer failed: aiohttp
    reports that as a connection failure, which is the provider's, and this one is not."""

    def __init__(self, chunks: AsyncIterator[bytes]) -> None:
        self._chunks = chunks
        self.failure: Exception | None = None

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._chunks:
                yield chunk
        except Exception as exc:
            self.failure = exc
            raise


async def uploaded(send: Callable[[AsyncIterator[bytes]], Awaitable[Sent]], chunks: AsyncIterator[bytes]) -> Sent:
    """`send(chunks)`, raising what the producer of `chunks` raised (an unsendable line's 400,
    the caller's own failure) rather than the connection failure aiohttp makes of it."""
    source = Source(chunks)
    try:
        return await send(aiter(source))
    except UpstreamError:
        if source.failure is not None:
            raise source.failure from None
        raise
