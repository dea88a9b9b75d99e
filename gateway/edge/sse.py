"""Server-sent events: parse an upstream stream event by event, frame events for clients."""

from collections.abc import AsyncIterator

from aiohttp import StreamReader
from aiohttp.http_exceptions import LineTooLong

from gateway.edge.errors import UpstreamError

DONE = b"data: [DONE]\n\n"
# The most one upstream event may hold: what one is held whole in memory to relay, so a hostile
# provider cannot grow it without end. A Responses API answer's closing events carry its whole
# text, so this is well above any answer a model writes (aiohttp's own line limit, 128 KiB, is not).
MAX_EVENT_BYTES = 8 << 20


class SseEvent(tuple):
    """(event name, data) of one server-sent event; the name is b'' when none was given."""

    @property
    def name(self) -> bytes:
        return self[0]

    @property
    def data(self) -> bytes:
        return self[1]


async def events(content: StreamReader) -> AsyncIterator[SseEvent]:
    """Yield each event as soon as its terminating blank line arrives (never buffered whole);
    an event over MAX_EVENT_BYTES is the provider's failure (502)."""
    name, data, size = b"", list[bytes](), 0
    async for raw in _lines(content):
        line = raw.rstrip(b"\r\n")
        if not line:
            if data:
                yield SseEvent((name, b"\n".join(data)))
            name, data, size = b"", [], 0
        elif line.startswith(b"data:"):
            data.append(line[5:].removeprefix(b" "))
            size += len(line)
            if size > MAX_EVENT_BYTES:
                raise _oversized()
        elif line.startswith(b"event:"):
            name = line[6:].strip()
    if data:
        yield SseEvent((name, b"\n".join(data)))


async def _lines(content: StreamReader) -> AsyncIterator[bytes]:
    try:
        while line := await content.readuntil(b"\n", max_size=MAX_EVENT_BYTES):
            yield line
    except LineTooLong:
        raise _oversized() from None


def _oversized() -> UpstreamError:
    return UpstreamError(502, f"the provider sent a stream event over {MAX_EVENT_BYTES >> 20} MiB")


def frame(data: bytes) -> bytes:
    """One `data:` event as sent to the client."""
    return b"data: " + data + b"\n\n"


def event_frame(name: str, data: bytes) -> bytes:
    """One named event (`event:` then `data:`), as Anthropic's and the Responses API's streams send them."""
    return b"event: " + name.encode() + b"\ndata: " + data + b"\n\n"
