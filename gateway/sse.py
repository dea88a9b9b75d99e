"""Server-sent events: parse an upstream stream event by event, frame events for clients."""

from collections.abc import AsyncIterator

from aiohttp import StreamReader

DONE = b"data: [DONE]\n\n"


class SseEvent(tuple):
    """(event name, data) of one server-sent event; the name is b'' when none was given."""

    @property
    def name(self) -> bytes:
        return self[0]

    @property
    def data(self) -> bytes:
        return self[1]


async def events(content: StreamReader) -> AsyncIterator[SseEvent]:
    """Yield each event as soon as its terminating blank line arrives (never buffered whole)."""
    name, data = b"", list[bytes]()
    async for raw in content:
        line = raw.rstrip(b"\r\n")
        if not line:
            if data:
                yield SseEvent((name, b"\n".join(data)))
            name, data = b"", []
        elif line.startswith(b"data:"):
            data.append(line[5:].removeprefix(b" "))
        elif line.startswith(b"event:"):
            name = line[6:].strip()
    if data:
        yield SseEvent((name, b"\n".join(data)))


def frame(data: bytes) -> bytes:
    """One `data:` event as sent to the client."""
    return b"data: " + data + b"\n\n"


def event_frame(name: str, data: bytes) -> bytes:
    """One named event (`event:` then `data:`), as Anthropic's and the Responses API's streams send them."""
    return b"event: " + name.encode() + b"\ndata: " + data + b"\n\n"
