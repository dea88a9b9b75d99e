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

from tests.tcp_proxy import TcpProxy, proxied_service

SSL_REQUEST = 80877103  # the code of an SSLRequest, which a client may send before its startup
ROUND_TRIP_ENDS = frozenset(b"QS")


class RoundTripCounter(TcpProxy):
    """A TcpProxy (tests/tcp_proxy.py) that reads its clients' side as messages, counting them."""

    def __init__(self, target_host: str, target_port: int) -> None:
        super().__init__(target_host, target_port)
        self.round_trips = 0

    async def _client_to_server(self, client: asyncio.StreamReader, server: asyncio.StreamWriter) -> None:
        await self._pump(client, server, self._messages(client))

    async def _messages(self, reader: asyncio.StreamReader) -> AsyncIterator[bytes]:
        """The client's messages, whole, counting those after which it waits for the server."""
        try:
            while True:  # untyped messages first: an SSLRequest (answered by one byte), then the startup
                head = await reader.readexactly(8)
                yield head + await reader.readexactly(struct.unpack("!i", head[:4])[0] - 8)
                if struct.unpack("!i", head[4:])[0] != SSL_REQUEST:
                    break
            while head := await reader.read(1):
                size = await reader.readexactly(4)
                body = await reader.readexactly(struct.unpack("!i", size)[0] - 4)
                self.round_trips += head[0] in ROUND_TRIP_ENDS
                yield head + size + body
        except asyncio.IncompleteReadError:
            return  # the client went away mid-message; its connection to the server is ended too


def counting_round_trips() -> contextlib.AbstractAsyncContextManager[RoundTripCounter]:
    """A counter in front of the local PostgreSQL (skips locally, fails under CI=true, without it)."""
    return proxied_service(5432, "PostgreSQL", RoundTripCounter)
