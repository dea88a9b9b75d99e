"""HTTP handlers: parse the request, call one service function, render the answer."""

from typing import TypeVar

import msgspec
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from gateway import (
    audio, chat, embeddings, health, messages, music, music_history, music_request, realtime,
    transcription, upload,
)
from gateway.errors import ApiError, bad_request
from gateway.jsonio import encode, loads
from gateway.state import CALLER, LOG_FIELDS, METRICS, SERVICES
from storage.objects import StorageError
from storage.serving import serve_object

T = TypeVar("T")
MAX_BODY_BYTES = music_request.MAX_BODY_BYTES  # the largest any route accepts
CHAT_BODY_BYTES = 32 * 1024 * 1024
TRUE_WORDS = frozenset({"1", "true", "yes", "on"})


def json_response(body: object, status: int = 200, headers: dict | None = None) -> web.Response:
    return web.Response(status=status, body=encode(body), content_type="application/json", headers=headers)


async def read_body(request: web.Request, limit: int) -> bytes:
    """The body, refused with 413 as soon as it is known to exceed `limit` (never buffered past it)."""
    if request.content_length is not None and request.content_length > limit:
        raise _too_large(limit)
    body = bytearray()
    async for chunk in request.content.iter_chunked(256 * 1024):
        body += chunk
        if len(body) > limit:
            raise _too_large(limit)
    return bytes(body)


def _too_large(limit: int) -> ApiError:
    return ApiError(413, f"the request body is larger than this route accepts ({limit} bytes)",
                    type="request_too_large")


async def parse_body(request: web.Request, schema: type[T], limit: int) -> tuple[dict, T]:
    """The JSON body as a dict (passed upstream) and as the validated `schema`."""
    try:
        raw = loads(await read_body(request, limit))
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
    _, _, field = message.partition("required field `")
    return field.partition("`")[0] or None


async def health_check(request: web.Request) -> web.Response:
    skip = {part.strip() for part in request.query.get("skip", "").split(",") if part.strip()}
    status, body = await health.report(request.app[SERVICES], skip)
    return json_response(body, status, headers={"Cache-Control": "no-store"})


async def list_models(request: web.Request) -> web.Response:
    query = request.query
    body = request.app[SERVICES].catalogue.models_body(
        include_deactivated=query.get("include_deactivated", "").lower() in TRUE_WORDS,
        exclude_deprecated=query.get("exclude_deprecated", "").lower() in TRUE_WORDS)
    return web.Response(body=body, content_type="application/json")


async def chat_completions(request: web.Request) -> web.StreamResponse:
    raw, parsed = await parse_body(request, chat.ChatRequest, CHAT_BODY_BYTES)
    request[LOG_FIELDS].update(model=parsed.model, stream=parsed.stream)
    services, caller = request.app[SERVICES], request[CALLER]
    if not parsed.stream:
        return json_response(await chat.complete(services, caller, raw, parsed))
    relay = await chat.open_stream(services, caller, raw, parsed)
    return await relay.send(request)


async def create_message(request: web.Request) -> web.StreamResponse:
    """Anthropic's Messages API (its SDK with base_url = the gateway root), for every chat model."""
    raw, parsed = await parse_body(request, messages.MessagesRequest, CHAT_BODY_BYTES)
    request[LOG_FIELDS].update(model=parsed.model, stream=parsed.stream)
    services, caller = request.app[SERVICES], request[CALLER]
    if not parsed.stream:
        return json_response(await messages.create(services, caller, raw, parsed))
    relay = await messages.open_stream(services, caller, raw, parsed)
    return await relay.send(request)


async def realtime_session(request: web.Request) -> web.StreamResponse:
    """GET /v1/realtime?model=...: a WebSocket relayed to the provider's realtime API."""
    realtime.check_handshake(request)
    model = request.query.get("model", "")
    request[LOG_FIELDS].update(model=model)
    session = await realtime.open_session(request.app[SERVICES], request[CALLER], model)
    return await session.run(request)


async def create_embeddings(request: web.Request) -> web.Response:
    raw, parsed = await parse_body(request, embeddings.EmbeddingRequest, embeddings.BODY_BYTES)
    request[LOG_FIELDS].update(model=parsed.model)
    return json_response(await embeddings.create(request.app[SERVICES], request[CALLER], raw, parsed))


async def create_speech(request: web.Request) -> web.StreamResponse:
    raw, parsed = await parse_body(request, audio.SpeechRequest, audio.BODY_BYTES)
    request[LOG_FIELDS].update(model=parsed.model, stream=True)
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
    request[LOG_FIELDS].update(model=parsed.model)
    body = await music.create(request.app[SERVICES], request[CALLER], raw, parsed,
                              request.headers.get("Idempotency-Key"))
    return json_response(body)


async def list_music(request: web.Request) -> web.Response:
    limit = _limit(request.query.get("limit"))
    items = await music_history.history(request.app[SERVICES], request[CALLER], limit)
    return json_response({"object": "list", "data": items}, headers={"Cache-Control": "no-store"})


def _limit(text: str | None, default: int = 30, most: int = music_history.MAX_LIMIT) -> int:
    if text is None:
        return default
    if not text.isdigit() or not 1 <= int(text) <= most:
        raise bad_request(f"limit must be a whole number from 1 to {most}, got {text!r}", "limit")
    return int(text)


async def music_content(request: web.Request) -> web.Response:
    path = await music_history.download_path(request.app[SERVICES], request[CALLER],
                                             request.match_info["track_id"])
    return web.Response(status=302, headers={"Location": path, "Cache-Control": "no-store"})


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


async def metrics(request: web.Request) -> web.Response:
    """Prometheus text format; every worker's samples summed (see gateway.metrics)."""
    body = await request.app[METRICS].render(request.app[SERVICES].recorder)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


def setup_routes(app: web.Application) -> None:
    app.router.add_get("/", health_check)
    app.router.add_get("/metrics", metrics)
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
    app.router.add_get("/media/{object_key:.+}", media)  # HEAD is routed with GET
