"""A minimal HTTP/1.1 keep-alive client over raw sockets for the load generators.

aiohttp's client costs several times more CPU per request than this, and the load generators
share the machine with what they measure. It knows just enough HTTP for the gateway and the fake
upstream: Content-Length and chunked bodies, no trailers, no redirects.
"""

import asyncio
from collections.abc import Callable
from typing import Protocol, runtime_checkable
from urllib.parse import urlsplit

OnBody = Callable[[bytes], None]
# The request every load generator sends (streams.py adds "stream": true).
CHAT_PATH = "/v1/chat/completions"
CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "benchmark prompt"}]}


def post_request(url: str, key: str, body: bytes) -> tuple[str, int, bytes]:
    """(host, port, the bytes of the POST) for `url`, sent unchanged for every request."""
    parts = urlsplit(url)
    if parts.hostname is None or parts.port is None:
        raise ValueError(f"{url!r} must name a host and a port")
    head = (f"POST {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\nAuthorization: Bearer {key}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n")
    return parts.hostname, parts.port, head.encode() + body


@runtime_checkable
class Pipe(Protocol):
    """What a connection uses of its transport. Checked by shape, not by class: uvloop's
    transports have these methods without deriving from asyncio.Transport."""

    def write(self, data: bytes) -> None: ...

    def close(self) -> None: ...


class Connection(asyncio.Protocol):
    """One keep-alive connection carrying one request at a time."""

    def __init__(self) -> None:
        self.transport: Pipe | None = None  # set once connected
        self.buffer = bytearray()
        self.waiter: asyncio.Future | None = None
        self.on_body: OnBody | None = None
        self.status = 0
        self.remaining = -1  # body bytes still due; -1: chunked
        self.state = self._head
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if not isinstance(transport, Pipe):
            raise TypeError(f"a stream transport is needed, not {type(transport).__name__}")
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.waiter and not self.waiter.done():
            self.waiter.set_exception(ConnectionError(f"connection lost: {exc}"))

    def request(self, raw: bytes, on_body: OnBody | None = None) -> asyncio.Future:
        """Send `raw`; the future resolves to the status once the whole response is read."""
        if self.transport is None:
            raise ConnectionError("request on a connection not yet made")
        self.waiter = asyncio.get_running_loop().create_future()
        self.on_body, self.state = on_body, self._head
        self.transport.write(raw)
        return self.waiter

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while self.state():  # each state consumes what it can; False: it needs more bytes
            pass

    def _head(self) -> bool:
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            return False
        lines = bytes(self.buffer[:end]).lower().split(b"\r\n")
        del self.buffer[:end + 4]
        self.status = int(lines[0].split(b" ", 2)[1])
        headers = dict(line.split(b": ", 1) for line in lines[1:] if b": " in line)
        self.remaining = int(headers.get(b"content-length", b"-1"))
        self.state = self._chunk_size if self.remaining < 0 else self._sized_body
        return True

    def _sized_body(self) -> bool:
        if len(self.buffer) < self.remaining:
            return False
        self._deliver(bytes(self.buffer[:self.remaining]))
        del self.buffer[:self.remaining]
        self._finish()
        return True

    def _chunk_size(self) -> bool:
        end = self.buffer.find(b"\r\n")
        if end < 0:
            return False
        size = int(bytes(self.buffer[:end]).split(b";")[0], 16)
        if size == 0:
            if len(self.buffer) < end + 4:  # "0\r\n\r\n": no trailers
                return False
            del self.buffer[:end + 4]
            self._finish()
            return True
        if len(self.buffer) < end + 2 + size + 2:
            return False
        self._deliver(bytes(self.buffer[end + 2:end + 2 + size]))
        del self.buffer[:end + 2 + size + 2]
        return True

    def _deliver(self, data: bytes) -> None:
        if self.on_body and data:
            self.on_body(data)

    def _finish(self) -> None:
        self.state = self._idle
        if self.waiter and not self.waiter.done():
            self.waiter.set_result(self.status)

    def _idle(self) -> bool:
        return False  # bytes with no request outstanding: left in the buffer, a protocol error

    def close(self) -> None:
        if self.transport:
            self.transport.close()


async def connect(host: str, port: int) -> Connection:
    _, connection = await asyncio.get_running_loop().create_connection(Connection, host, port)
    return connection


def percentile(sorted_values: list[float], fraction: float) -> float | None:
    """The value below which `fraction` of the values lie (nearest rank); None when empty."""
    if not sorted_values:
        return None
    return sorted_values[min(len(sorted_values) - 1, max(0, round(fraction * len(sorted_values)) - 1))]
