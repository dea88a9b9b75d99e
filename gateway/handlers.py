"""HTTP handlers: parse the request, call one service function, render the answer."""

from typing import TypeVar

import msgspec
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from gateway import (
    audio, chat, dashboard, edge, embeddings, health, messages, music,
    music_history, music_request, openapi, org_keys, realtime, request_logs, transcription, upload, usage,
)
from gateway.errors import ApiError, bad_request
from gateway.body_budget import BODY_HOLD
from gateway.jsonio import decode_body, encode
from gateway.state import CALLER, FACTS, METRICS, SERVICES
from storage.objects import StorageError
from storage.serving import serve_object

T = TypeVar("T")
MAX_BODY_BYTES = music_request.MAX_BODY_BYTES  # the largest any route accepts
CHAT_BODY_BYTES = 32 * 1024 * 1024
KEY_BODY_BYTES = 4096
BODY_CHUNK_BYTES = 256 * 1024
NO_STORE = {"Cache-Control": "no-store"}  # account data: never kept by a browser or a proxy
TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
IDEMPOTENCY_KEY = "Idempotency-Key"


def json_response(body: object, status: int = 200, headers: dict | None = None) -> web.Response:
    return web.Response(status=status, body=encode(body), content_type="application/json", headers=headers)


async def read_body(request: web.Request, limit: int) -> bytearray:
    """The body, refused with 413 as soon as it is known to exceed `limit` (never buffered past it).
    Its bytes are drawn from the process's body budget before they are read (503 while it is
    spent, see gateway.intake): a declared length at once, a chunked body as it arrives. Not
    copied into `bytes`: the largest bodies weigh ~112 MB."""
    declared = request.content_length
    if declared is not None and declared > limit:
        raise _too_large(limit)
    hold, held = request[BODY_HOLD], declared or 0
    await hold.take(held)
    body = bytearray()
    async for chunk in request.content.iter_chunked(BODY_CHUNK_BYTES):
        size = len(body) + len(chunk)
        if size > limit:
            raise _too_large(limit)
        if size > held:
            await hold.take(size - held)
            held = size
        body += chunk
    return body


def _too_large(limit: int) -> ApiError:
    return ApiError(413, f"the request body is larger than this route accepts ({limit} bytes)",
                    type="request_too_large")


async def parse_body(request: web.Request, schema: type[T], limit: int) -> tuple[dict, T]:
    """The JSON body as a dict (passed upstream) and as the validated `schema`."""
    try:
        raw = decode_body(await read_body(request, limit))
    except ValueError:
        raise bad_request("the request body is not valid JSON") from None
    if not isinstance(raw, dict):
        raise bad_request("the request body must be a JSON object")
    try:
        return raw, msgspec.convert(raw, schema)
    except msgspec.ValidationError as exc:
        raise bad_request(f"invalid request: {exc}", _param_of(exc)) from None


def _param_of(exc: msgspec.ValidationError) -> str | None:
    """The top-level field a msgspec validation message points at."""
    message = str(exc)
    if " - at `$." in message:
        return message.rpartition(" - at `$.")[2].rstrip("`").split("[")[0].split(".")[0]
    for phrase in ("required field `", "unknown field `"):
        _, _, field = message.partition(phrase)
        if field:
            return field.partition("`")[0]
    return None


async def health_check(request: web.Request) -> web.Response:
    skip = {part.strip() for part in request.query.get("skip", "").split(",") if part.strip()}
    status, body = await health.report(request.app[SERVICES], skip)
    return json_response(body, status, headers=NO_STORE)


async def list_models(request: web.Request) -> web.Response:
    query = request.query
    body = request.app[SERVICES].catalogue.models_body(
        include_deactivated=query.get("include_deactivated", "").lower() in TRUE_WORDS,
        exclude_deprecated=query.get("exclude_deprecated", "").lower() in TRUE_WORDS)
    return web.Response(body=body, content_type="application/json")


async def chat_completions(request: web.Request) -> web.StreamResponse:
    raw, parsed = await parse_body(request, chat.ChatRequest, CHAT_BODY_BYTES)
    request[FACTS].update(model=parsed.model, stream=parsed.stream)
    services, caller = request.app[SERVICES], request[CALLER]
    if not parsed.stream:
        return json_response(await chat.complete(services, caller, raw, parsed))
    relay = await chat.open_stream(services, caller, raw, parsed)
    return await relay.send(request)


async def create_message(request: web.Request) -> web.StreamResponse:
    """Anthropic's Messages API (its SDK with base_url = the gateway root), for every chat model."""
    raw, parsed = await parse_body(request, messages.MessagesRequest, CHAT_BODY_BYTES)
    request[FACTS].update(model=parsed.model, stream=parsed.stream)
    services, caller = request.app[SERVICES], request[CALLER]
    if not parsed.stream:
        return json_response(await messages.create(services, caller, raw, parsed))
    relay = await messages.open_stream(services, caller, raw, parsed)
    return await relay.send(request)


async def realtime_session(request: web.Request) -> web.StreamResponse:
    """GET /v1/realtime?model=...: a WebSocket relayed to the provider's realtime API."""
    realtime.check_handshake(request)
    model = request.query.get("model", "")
    request[FACTS].update(model=model)
    session = await realtime.open_session(request.app[SERVICES], request[CALLER], model)
    return await session.run(request)


async def create_embeddings(request: web.Request) -> web.Response:
    raw, parsed = await parse_body(request, embeddings.EmbeddingRequest, embeddings.BODY_BYTES)
    request[FACTS].update(model=parsed.model)
    return json_response(await embeddings.create(request.app[SERVICES], request[CALLER], raw, parsed))


async def create_speech(request: web.Request) -> web.StreamResponse:
    raw, parsed = await parse_body(request, audio.SpeechRequest, audio.BODY_BYTES)
    request[FACTS].update(model=parsed.model, stream=True)
    relay = await audio.open_speech(request.app[SERVICES], request[CALLER], raw, parsed)
    return await relay.send(request)


async def create_transcription(request: web.Request) -> web.Response:
    """Multipart, read part by part: the file goes upstream as it arrives (see gateway.upload)."""
    form = await upload.open_form(request)
    body, content_type = await transcription.transcribe(request.app[SERVICES], request[CALLER], form)
    charset = "utf-8" if content_type == "text/plain" else None
    return web.Response(body=body, content_type=content_type, charset=charset)


async def create_music(request: web.Request) -> web.Response:
    raw, parsed = await parse_body(request, music_request.MusicRequest, MAX_BODY_BYTES)
    request[FACTS].update(model=parsed.model)
    body = await music.create(request.app[SERVICES], request[CALLER], raw, parsed,
                              edge.header(request, IDEMPOTENCY_KEY))
    return json_response(body)


async def list_music(request: web.Request) -> web.Response:
    limit = music_history.LIMIT.read(request.query)
    items = await music_history.history(request.app[SERVICES], request[CALLER], limit)
    return json_response({"object": "list", "data": items}, headers=NO_STORE)


async def music_content(request: web.Request) -> web.Response:
    path, _ = await music_history.download_link(request.app[SERVICES], request[CALLER],
                                                request.match_info["track_id"])
    return web.Response(status=302, headers={"Location": path, "Cache-Control": "no-store"})


async def music_link(request: web.Request) -> web.Response:
    """The signed path as JSON, for a page: fetch() cannot read a redirect's Location."""
    path, expires = await music_history.download_link(request.app[SERVICES], request[CALLER],
                                                      request.match_info["track_id"])
    return json_response({"url": path, "expires_at": expires}, headers=NO_STORE)


async def usage_overview(request: web.Request) -> web.Response:
    days = usage.DAYS.read(request.query)
    body = await usage.overview(request.app[SERVICES], request[CALLER], days)
    return json_response(body, headers=NO_STORE)


async def list_logs(request: web.Request) -> web.Response:
    query = request_logs.parse_query(request.query)
    body = await request_logs.page(request.app[SERVICES], request[CALLER], query)
    return json_response(body, headers=NO_STORE)


async def get_log(request: web.Request) -> web.Response:
    body = await request_logs.detail(request.app[SERVICES], request[CALLER], request.match_info["log_id"])
    return json_response(body, headers=NO_STORE)


async def list_keys(request: web.Request) -> web.Response:
    body = await org_keys.listing(request.app[SERVICES], request[CALLER])
    return json_response(body, headers=NO_STORE)


async def create_key(request: web.Request) -> web.Response:
    _, parsed = await parse_body(request, org_keys.NewKey, KEY_BODY_BYTES)
    body = await org_keys.create(request.app[SERVICES], request[CALLER], parsed)
    return json_response(body, status=201, headers=NO_STORE)


async def revoke_key(request: web.Request) -> web.Response:
    return json_response(await org_keys.revoke(request.app[SERVICES], request[CALLER], request.match_info["key_id"]))


async def media(request: web.Request) -> web.StreamResponse:
    """A signed download path: no API key, the signature is the permission."""
    services, key = request.app[SERVICES], request.match_info["object_key"]
    query = request.query
    if not services.signer.check(key, query.get("expires", ""), query.get("signature", "")):
        raise ApiError(403, "this download link is invalid or has expired", type="forbidden")
    if services.store is None:
        raise ApiError(404, "no object storage is configured", type="not_found")
    try:
        stored = await services.store.head(key)
        if stored is None:
            raise ApiError(410, "this track was deleted after the retention period", type="gone")
        return await serve_object(request, services.store, stored, "audio/mpeg")
    except StorageError as exc:
        raise ApiError(502, f"object storage failed: {exc}", type="storage_error") from None


async def openapi_document(request: web.Request) -> web.Response:
    return web.Response(body=request.app[openapi.DOCUMENT], content_type="application/json")


async def metrics(request: web.Request) -> web.Response:
    """Prometheus text format; every worker's samples summed (see gateway.metrics)."""
    body = await request.app[METRICS].render(request.app[SERVICES].recorder)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


def setup_routes(app: web.Application) -> None:
    app.router.add_get("/", health_check)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/openapi.json", openapi_document)
    app.router.add_get("/v1/models", list_models)
    app.router.add_post("/v1/chat/completions", chat_completions)
    app.router.add_post("/v1/messages", create_message)
    app.router.add_post("/v1/embeddings", create_embeddings)
    app.router.add_post("/v1/audio/speech", create_speech)
    app.router.add_post("/v1/audio/transcriptions", create_transcription, expect_handler=upload.expect_continue)
    app.router.add_get("/v1/realtime", realtime_session)
    app.router.add_post("/v1/music", create_music)
    app.router.add_get("/v1/music", list_music)
    app.router.add_get("/v1/music/{track_id}/content", music_content)
    app.router.add_get("/v1/music/{track_id}/link", music_link)
    app.router.add_get("/v1/usage", usage_overview)
    app.router.add_get("/v1/logs", list_logs)
    app.router.add_get("/v1/logs/{log_id}", get_log)
    app.router.add_get("/v1/keys", list_keys)
    app.router.add_post("/v1/keys", create_key)
    app.router.add_delete("/v1/keys/{key_id}", revoke_key)
    dashboard.setup_routes(app)
    app.router.add_get("/media/{object_key:.+}", media)  # HEAD is routed with GET
    app.on_startup.append(openapi.build)  # after the catalogue is loaded (cleanup contexts run first)
