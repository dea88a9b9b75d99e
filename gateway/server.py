"""Running the gateway: one process serving until SIGINT or SIGTERM, then draining."""

import asyncio
import signal

import structlog
from aiohttp import web

from gateway.app import create_app
from gateway.config import Config

log = structlog.get_logger("gateway.server")


async def serve(config: Config, banner: str = "") -> None:
    """Serve until a stop signal; in-flight requests and streams finish before exit."""
    # Cancelling a handler when its client leaves is what stops the upstream generation.
    runner = web.AppRunner(create_app(config), handler_cancellation=True, access_log=None)
    try:
        await runner.setup()  # inside: a failed start-up still closes what it opened
        site = web.TCPSite(runner, config.server.host, config.server.port, backlog=2048)
        await site.start()
        url = _url_of(site)
        log.info("gateway_ready", url=url, ledger=config.ledger.url.split("@")[-1])
        if banner:
            print(banner.format(url=url), flush=True)
        await _stop_signal()
        log.info("gateway_stopping")
    finally:
        await runner.cleanup()


def _url_of(site: web.TCPSite) -> str:
    host, port = site._server.sockets[0].getsockname()[:2]  # the real port when 0 was asked
    return f"http://{host}:{port}"


async def _stop_signal() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
