"""CLI: ``python -m simulator [--host H] [--port P] [--latency-ms N] [--tokens-per-second X]
[--completion-tokens N] [--outage 503|hang|drop]``.

Once listening it prints exactly one JSON line to stdout,
``{"event": "simulator_ready", "url": "http://<host>:<port>", "clouds": {...}}``, so a parent
process can start it with ``--port 0`` and learn the port, and the test credentials its clouds
check (`simulator.cloud_credentials.for_clients`: Azure's api-key, a service account whose
tokens it issues). SIGINT/SIGTERM stop it with exit code 0.
"""

import argparse
import asyncio
import signal
import sys

import msgspec
import orjson
from aiohttp import web

from simulator.app import create_app
from simulator.cloud_credentials import for_clients
from simulator.outage import Outage
from simulator.settings import Settings

# Hanging requests would otherwise hold shutdown for aiohttp's default 60 s.
SHUTDOWN_TIMEOUT_S = 1.0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command-line options (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m simulator", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--latency-ms", type=int, default=0)
    parser.add_argument("--tokens-per-second", type=float, default=0)
    parser.add_argument("--completion-tokens", type=int, default=16)
    parser.add_argument("--outage", default="", type=_outage,
                        help="fail every provider request: a status (503), hang or drop; POST /_sim/outage changes it")
    return parser.parse_args(argv)


def _outage(text: str) -> str:
    try:
        Outage.named(text)
    except (ValueError, msgspec.ValidationError):
        raise argparse.ArgumentTypeError(f"{text!r} is not an error status (400-599), hang or drop") from None
    return text


def settings_from(args: argparse.Namespace) -> Settings:
    """The Settings the command-line options ask for."""
    return Settings(
        latency_ms=args.latency_ms,
        tokens_per_second=args.tokens_per_second,
        completion_tokens=args.completion_tokens,
        outage=args.outage,
    )


def base_url(host: str, port: int) -> str:
    """The http URL of host:port, bracketing IPv6 literals."""
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def ready_line(url: str) -> str:
    """The readiness announcement, spaced exactly as documented so even a grep finds it."""
    clouds = orjson.dumps(for_clients(url)).decode()
    return '{"event": "simulator_ready", "url": ' + orjson.dumps(url).decode() + ', "clouds": ' + clouds + "}"


async def serve(args: argparse.Namespace) -> None:
    """Run until SIGINT or SIGTERM, announcing readiness on stdout."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    runner = web.AppRunner(
        create_app(settings_from(args)), access_log=None, shutdown_timeout=SHUTDOWN_TIMEOUT_S
    )
    await runner.setup()
    try:
        site = web.TCPSite(runner, args.host, args.port)
        await site.start()
        port = runner.addresses[0][1]  # the real port, also when --port 0
        sys.stdout.write(ready_line(base_url(args.host, port)) + "\n")
        sys.stdout.flush()
        await stop.wait()
    finally:
        await runner.cleanup()


def main(argv: list[str] | None = None) -> int:
    """Serve until signalled; the exit status is 0 after a signal-initiated shutdown."""
    asyncio.run(serve(parse_args(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
