"""The floor under the gateway: a bare aiohttp proxy in front of the fake upstream.

What any aiohttp gateway pays before doing anything of its own: the aiohttp server takes the
request, one pooled aiohttp client session (as the gateway's, uvloop, no tracing) sends the body
to the upstream, and the answer goes back (an SSE answer relayed chunk by chunk). No
authentication, ledger, log line or metrics. `bench.scale --configs floor` measures it beside
the gateway, so the CPU per request that is the gateway's own is the difference of the two rows.

    python -m bench.bare_proxy --upstream URL [--port 0]

Prints one JSON line {"event": "bare_proxy_ready", "url": ...} on stdout once it listens.
"""

import argparse
from collections.abc import AsyncIterator

import aiohttp
from aiohttp import web

from bench.fake_upstream import serve_app
from bench.http_wire import CHAT_PATH

READY_EVENT = "bare_proxy_ready"
FORWARDED = ("Authorization", "Content-Type")
SESSION = web.AppKey("session", aiohttp.ClientSession)


def make_app(upstream: str) -> web.Application:
    url = upstream + CHAT_PATH
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=60)

    async def session_ctx(app: web.Application) -> AsyncIterator[None]:
        connector = aiohttp.TCPConnector(limit=0, limit_per_host=0)
        async with aiohttp.ClientSession(connector=connector) as app[SESSION]:
            yield

    async def relay(request: web.Request) -> web.StreamResponse:
        headers = {name: request.headers[name] for name in FORWARDED if name in request.headers}
        async with app[SESSION].post(url, data=await request.read(), headers=headers,
                                       timeout=timeout) as answer:
            if answer.content_type != "text/event-stream":
                return web.Response(body=await answer.read(), status=answer.status,
                                    content_type=answer.content_type)
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await response.prepare(request)
            async for chunk in answer.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
            return response

    app = web.Application()
    app.cleanup_ctx.append(session_ctx)
    app.router.add_post(CHAT_PATH, relay)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", required=True, help="the fake upstream's base URL")
    parser.add_argument("--port", type=int, default=0)
    import uvloop
    args = parser.parse_args()
    uvloop.run(serve_app(make_app(args.upstream), args.port, READY_EVENT))


if __name__ == "__main__":
    main()
