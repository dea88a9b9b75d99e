"""A TCP proxy in front of PostgreSQL that counts the round trips its clients make.

A client of the PostgreSQL wire protocol waits for the server's ReadyForQuery after each simple
Query ('Q') and after each Sync ('S') that ends a run of extended-protocol messages (Parse, Bind,
Execute, ...): those two messages are exactly its round trips. The proxy reads the client's side
of every connection as messages and counts them; bytes pass through unchanged.
"""

import asyncio
import contextlib
import struct
from collections.abc import AsyncIterator

from support import need_service

SSL_REQUEST = 80877103  # the code of an SSLRequest, which a client may send before its startup
ROUND_TRIP_ENDS = frozenset(b"QS")


class RoundTripCounter:
    def __init__(self, target_port: int) -> None:
        self._target_port = target_port
        self.round_trips = 0
        self.port = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _accept(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        server_reader, server_writer = await asyncio.open_connection("127.0.0.1", self._target_port)
        pumps = [asyncio.create_task(self._client_side(client_reader, server_writer)),
                 asyncio.create_task(_pump(server_reader, client_writer))]
        self._tasks.update(pumps)
        await asyncio.gather(*pumps, return_exceptions=True)
        self._tasks.difference_update(pumps)
        for writer in (client_writer, server_writer):
            writer.close()

    async def _client_side(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Forward the client's messages, counting those after which it waits for the server."""
        while True:  # untyped messages first: an SSLRequest (answered by one byte), then the startup
            head = await reader.readexactly(8)
            body = await reader.readexactly(struct.unpack("!i", head[:4])[0] - 8)
            writer.write(head + body)
            if struct.unpack("!i", head[4:])[0] != SSL_REQUEST:
                break
        while head := await reader.read(1):
            size = await reader.readexactly(4)
            writer.write(head + size + await reader.readexactly(struct.unpack("!i", size)[0] - 4))
            self.round_trips += head[0] in ROUND_TRIP_ENDS


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(65536):
        writer.write(data)
        await writer.drain()


@contextlib.asynccontextmanager
async def counting_round_trips() -> AsyncIterator[RoundTripCounter]:
    """A counter in front of the local PostgreSQL (skips locally, fails under CI=true, without it)."""
    need_service("127.0.0.1", 5432, "PostgreSQL")
    counter = RoundTripCounter(5432)
    await counter.start()
    try:
        yield counter
    finally:
        await counter.close()
