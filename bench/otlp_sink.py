"""An OTLP/HTTP collector that keeps nothing: it answers every export (POST /v1/traces) and counts
the exports and their bytes (GET /count), so the tracing benchmark measures the gateway's side.

    python -m bench.otlp_sink [--port 0]
"""

import argparse

from aiohttp import web

from bench.fake_upstream import serve_app

READY_EVENT = "otlp_sink_ready"
COUNTS = web.AppKey("counts", dict)


async def traces(request: web.Request) -> web.Response:
    counts = request.app[COUNTS]
    counts["exports"] += 1
    counts["bytes"] += len(await request.read())
    return web.Response(status=200, content_type="application/x-protobuf", body=b"")


async def count(request: web.Request) -> web.Response:
    return web.json_response(request.app[COUNTS])


def make_app() -> web.Application:
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app[COUNTS] = {"exports": 0, "bytes": 0}
    app.router.add_post("/v1/traces", traces)
    app.router.add_get("/count", count)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    import uvloop
    uvloop.run(serve_app(make_app(), parser.parse_args().port, READY_EVENT))


if __name__ == "__main__":
    main()
