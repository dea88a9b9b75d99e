"""Watching and cutting the client connection of a request.

aiohttp cancels a handler whose client went away only when the runner has
handler_cancellation on: off by default (so in `python -m simulator`), but forced
on by aiohttp's TestServer. There is no public "disconnected" callback. When the
connection is lost the protocol drops its transport, so `request.transport`
becoming None (or closing) is the observable signal; we poll it, which works in
both setups (with cancellation the wait simply ends in CancelledError earlier).
"""

import asyncio

from aiohttp import web

POLL_INTERVAL_S = 0.02


def client_gone(request: web.BaseRequest) -> bool:
    """True once the client's connection is closed or closing."""
    transport = request.transport
    return transport is None or transport.is_closing()


async def wait_until_gone(request: web.BaseRequest, timeout: float | None = None) -> bool:
    """Wait until the client goes away (True) or `timeout` seconds pass first (False).

    Doubles as a disconnect-aware sleep: a departed client ends the wait early.
    """
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout
    while not client_gone(request):
        if deadline is None:
            await asyncio.sleep(POLL_INTERVAL_S)
            continue
        remaining = deadline - loop.time()
        if remaining <= 0:
            return False
        await asyncio.sleep(min(POLL_INTERVAL_S, remaining))
    return True


def drop_connection(request: web.BaseRequest) -> None:
    """Abort the TCP connection at once: no further bytes, no orderly close."""
    transport = request.transport
    if transport is not None:
        transport.abort()
