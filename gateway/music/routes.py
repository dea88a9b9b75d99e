"""Music's routes: POST /v1/music, the history, a track's content and link, and the signed
/media download. Each handler parses, calls one function of gateway.music, and renders."""

from aiohttp import web

from gateway.edge import parsing as edge
from gateway.edge.bodies import NO_STORE, json_response, parse_body
from gateway.music import download, generation, history
from gateway.music.request import MAX_BODY_BYTES, MusicRequest
from gateway.edge.state import CALLER, FACTS, SERVICES

IDEMPOTENCY_KEY = "Idempotency-Key"


async def create_music(request: web.Request) -> web.Response:
    raw, parsed = await parse_body(request, MusicRequest, MAX_BODY_BYTES)
    request[FACTS].update(model=parsed.model)
    body = await generation.create(request.app[SERVICES], request[CALLER], raw, parsed,
                                   edge.header(request, IDEMPOTENCY_KEY))
    return json_response(body)


async def list_music(request: web.Request) -> web.Response:
    limit = history.LIMIT.read(request.query)
    items = await history.history(request.app[SERVICES], request[CALLER], limit)
    return json_response({"object": "list", "data": items}, headers=NO_STORE)


async def music_content(request: web.Request) -> web.Response:
    path, _ = await history.download_link(request.app[SERVICES], request[CALLER],
                                          request.match_info["track_id"])
    return web.Response(status=302, headers={"Location": path, "Cache-Control": "no-store"})


async def music_link(request: web.Request) -> web.Response:
    """The signed path as JSON, for a page: fetch() cannot read a redirect's Location."""
    path, expires = await history.download_link(request.app[SERVICES], request[CALLER],
                                                request.match_info["track_id"])
    return json_response({"url": path, "expires_at": expires}, headers=NO_STORE)


def setup_routes(app: web.Application) -> None:
    app.router.add_post("/v1/music", create_music)
    app.router.add_get("/v1/music", list_music)
    app.router.add_get("/v1/music/{track_id}/content", music_content)
    app.router.add_get("/v1/music/{track_id}/link", music_link)
    app.router.add_get("/media/{object_key:.+}", download.media)  # HEAD is routed with GET
