"""Running the gateway: one process serving until SIGINT or SIGTERM, then draining."""

import asyncio
import os
import signal
from collections.abc import Callable

import structlog
from aiohttp import web

from gateway.app import create_app, reload_catalogue
from gateway.config import Config
from gateway.edge.connections import GuardedAppRunner, Timeouts

log = structlog.get_logger("gateway.server")


async def serve(config: Config, banner: str = "", *, reuse_port: bool = False,
                on_ready: Callable[[str], None] | None = None, stop_if_orphaned: bool = False) -> None:
    """Serve until a stop signal (or, for a worker, until its parent is gone); in-flight
    requests and streams finish before exit."""
    stop = _stop_on_signals()  # first: a stop during start-up is kept, not lost
    watch = asyncio.create_task(_orphaned(stop)) if stop_if_orphaned else None
    # Cancelling a handler when its client leaves is what stops the upstream generation.
    settings = config.server
    app = create_app(config)
    runner = GuardedAppRunner(app, handler_cancellation=True, access_log=None,
                              shutdown_timeout=settings.shutdown_timeout_s,
                              keepalive_timeout=settings.keepalive_timeout_s,
                              timeouts=Timeouts(settings.header_timeout_s, settings.body_timeout_s))
    try:
        await runner.setup()  # inside: a failed start-up still closes what it opened
        site = web.TCPSite(runner, config.server.host, config.server.port, backlog=2048,
                           reuse_port=reuse_port or None)
        await site.start()
        reloads = _reload_on_hangup(app)  # kept: each reload finishes before the app is cleaned up
        url = _url_of(runner)
        log.info("gateway_ready", url=url, ledger=config.ledger.url.split("@")[-1])
        if banner:
            print(banner.format(url=url), flush=True)
        if on_ready:
            on_ready(url)
        await stop.wait()
        log.info("gateway_stopping")
        await asyncio.gather(*reloads, return_exceptions=True)
    finally:
        if watch:
            watch.cancel()
        await runner.cleanup()


def _url_of(runner: web.BaseRunner) -> str:
    """Where the runner's one site listens: the real port when 0 was asked."""
    host, port = runner.addresses[0][:2]
    return f"http://{host}:{port}"


def _reload_on_hangup(app: web.Application) -> set[asyncio.Task]:
    """SIGHUP publishes the catalogue file again (gateway.app.reload_catalogue); the tasks are kept
    until they end."""
    reloads: set[asyncio.Task] = set()

    def reload() -> None:
        task = asyncio.create_task(reload_catalogue(app), name="catalogue-reload")
        reloads.add(task)
        task.add_done_callback(reloads.discard)

    asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, reload)
    return reloads


def _stop_on_signals() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return stop


async def _orphaned(stop: asyncio.Event, every_s: float = 0.5) -> None:
    """Set `stop` once the parent is gone: a supervisor killed with SIGKILL cannot forward a
    signal, and its workers must not serve on unsupervised."""
    parent = os.getppid()
    while os.getppid() == parent:  # noqa: ASYNC110  (no event tells a process its parent died)
        await asyncio.sleep(every_s)
    log.warning("gateway_supervisor_gone", parent=parent)
    stop.set()


def use_uvloop() -> None:
    try:
        import uvloop
    except ImportError:
        return  # uvloop is optional (absent on Windows); the default loop works, slower
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
