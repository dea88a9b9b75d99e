"""Music's routes: POST /v1/music (paid), the history, a track's content and link, and the signed
/media download (public; HEAD served as GET). Each handler parses, calls one function of
gateway.music, and renders."""

from aiohttp import web

from gateway.edge import parsing as edge
from gateway.edge.bodies import NO_STORE, json_response, parse_body
from gateway.edge.routes import Endpoint, JsonBody, Param
from gateway.music import download, generation, history, links
from gateway.music.parts import MUSIC
from gateway.music.request import MAX_BODY_BYTES, MusicRequest
from gateway.edge.state import CALLER, FACTS, SERVICES

IDEMPOTENCY_KEY = "Idempotency-Key"
BODY = JsonBody(MusicRequest, MAX_BODY_BYTES)
AUDIO = ("audio/mpeg",)


async def create_music(request: web.Request) -> web.Response:
    raw, parsed = await parse_body(request, BODY)
    request[FACTS].update(model=parsed.model)
    body = await generation.create(request.app[SERVICES], request.app[MUSIC].idempotency, request[CALLER],
                                   raw, parsed, edge.header(request, IDEMPOTENCY_KEY))
    return json_response(body)


async def list_music(request: web.Request) -> web.Response:
    limit = history.LIMIT.read(request.query)
    items = await history.history(request.app[SERVICES], request[CALLER], limit)
    return json_response({"object": "list", "data": items}, headers=NO_STORE)


async def music_content(request: web.Request) -> web.Response:
    path, _ = await history.download_link(request.app[SERVICES], request.app[MUSIC].signer, request[CALLER],
                                          request.match_info["track_id"])
    return web.Response(status=302, headers={"Location": path, "Cache-Control": "no-store"})


async def music_link(request: web.Request) -> web.Response:
    """The signed path as JSON, for a page: fetch() cannot read a redirect's Location."""
    path, expires = await history.download_link(request.app[SERVICES], request.app[MUSIC].signer, request[CALLER],
                                                request.match_info["track_id"])
    return json_response({"url": path, "expires_at": expires}, headers=NO_STORE)


ENDPOINTS = (
    Endpoint("POST", generation.ROUTE, create_music, "Music generation", body=BODY, paid=True, model_kind="music",
             kind_home=True, headers=(Param(IDEMPOTENCY_KEY, {"type": "string", "maxLength": 255}, where="header"),)),
    Endpoint("GET", generation.ROUTE, list_music, "Music history", query=(Param.whole(history.LIMIT),)),
    Endpoint("GET", generation.ROUTE + "/{track_id}/content", music_content,
             "A track's audio (a redirect to a signed link)", answers={"302": ()}),
    Endpoint("GET", generation.ROUTE + "/{track_id}/link", music_link, "A track's signed download link"),
    # Public: the signature is the permission. The placeholder takes the rest of the path.
    Endpoint("GET", links.MEDIA_PREFIX + "{object_key:.+}", download.media,
             "Hosted audio through a signed link (ranges supported)", public=True,
             query=(Param("expires", required=True), Param("signature", required=True)),
             answers={"200": AUDIO, "206": AUDIO}),
)
