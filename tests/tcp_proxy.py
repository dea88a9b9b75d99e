"""A TCP proxy on 127.0.0.1 that a test controls, to cut a dependency (PostgreSQL, Redis) mid-load.

    proxy = await TcpProxy.start("127.0.0.1", 5432)   # forwards to the target
    await proxy.refuse()      # stop listening: new connections are refused
    proxy.reset()             # existing connections are reset (RST), as when a server dies
    proxy.blackhole()         # connections stay open, but no byte goes either way
    await proxy.cut(how)      # "refused" (reset, then refuse) or "blackholed"
    await proxy.restore()     # listen and forward again; blackholed bytes are delivered
    await proxy.close()

`proxied_service(port, name)` is the same as an async context manager that first checks the
service is there (`support.need_service`).

A blackhole is a network partition: every byte read is held back until `restore`, so a
connection that outlives it carries on exactly as TCP would after the partition heals.
"""

import asyncio
import contextlib
import socket
import struct
from collections.abc import AsyncIterator

from tests.support import need_service


class TcpProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self._target = (target_host, target_port)
        self._server: asyncio.Server | None = None
        self.port = 0
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task] = set()

    @classmethod
    async def start(cls, target_host: str, target_port: int) -> "TcpProxy":
        proxy = cls(target_host, target_port)
        await proxy._listen()
        return proxy

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port, reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]

    async def refuse(self) -> None:
        """Stop listening: a connection attempt is refused until `restore`."""
        if self._server is not None:
            self._server.close()  # closes the listening socket at once; open connections stay
            self._server = None

    def reset(self) -> None:
        """Reset every open connection, both sides (RST, not a polite FIN)."""
        for writer in list(self._writers):
            sock = writer.get_extra_info("socket")
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
        self._writers.clear()

    def blackhole(self) -> None:
        """Accept connections but pass no byte either way until `restore`."""
        self._flowing.clear()

    async def cut(self, how: str) -> None:
        """"refused": the server is gone (open connections reset, new ones refused); anything
        else ("blackholed"): the network drops everything (connections stay open, hear nothing)."""
        if how == "refused":
            self.reset()
            await self.refuse()
        else:
            self.blackhole()

    async def restore(self) -> None:
        """Listen and forward again."""
        self._flowing.set()
        if self._server is None:
            await self._listen()

    async def close(self) -> None:
        await self.refuse()
        self.reset()
        self._flowing.set()  # connections held by a blackhole now see their sockets closed
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _accept(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        self._writers.add(client_writer)
        await self._flowing.wait()  # a blackholed connection is accepted, then hears nothing
        if client_writer.transport.is_closing():
            return
        try:
            server_reader, server_writer = await asyncio.open_connection(*self._target)
        except OSError:
            client_writer.transport.abort()
            return
        self._writers.add(server_writer)
        pumps = [asyncio.create_task(self._client_to_server(client_reader, server_writer)),
                 asyncio.create_task(self._pump(server_reader, client_writer))]
        self._tasks.update(pumps)
        await asyncio.gather(*pumps, return_exceptions=True)
        self._tasks.difference_update(pumps)

    async def _client_to_server(self, client: asyncio.StreamReader, server: asyncio.StreamWriter) -> None:
        """The client's bytes to the server: a subclass may override this to watch them."""
        await self._pump(client, server)

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    chunks: AsyncIterator[bytes] | None = None) -> None:
        """Forward `chunks` (by default, whatever `reader` has) to `writer` until the end or a reset."""
        source = chunks if chunks is not None else _chunks(reader)
        try:
            async with contextlib.aclosing(source):
                async for data in source:
                    await self._flowing.wait()  # held back while blackholed
                    if writer.transport.is_closing():
                        return
                    writer.write(data)
                    await writer.drain()
        except (OSError, RuntimeError):
            pass  # the other side was reset: this direction is done
        finally:
            self._writers.discard(writer)
            writer.transport.abort()


async def _chunks(reader: asyncio.StreamReader) -> AsyncIterator[bytes]:
    while data := await reader.read(65536):
        yield data


@contextlib.asynccontextmanager
async def proxied_service(port: int, name: str, proxy_class: type[TcpProxy] = TcpProxy) -> AsyncIterator[TcpProxy]:
    """A proxy (a `proxy_class`) to the local service `name` listening on `port`, closed afterwards
    (skips locally, fails under CI=true, when the service is not listening)."""
    need_service("127.0.0.1", port, name)
    proxy = await proxy_class.start("127.0.0.1", port)
    try:
        yield proxy
    finally:
        await proxy.close()
