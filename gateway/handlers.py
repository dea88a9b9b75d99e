"""The core API's handlers (health, metrics, the OpenAPI document, models, chat, messages,
embeddings, audio, realtime) and the application's route table, which adds music's routes and
the dashboard's (gateway.music.routes, gateway.dashboard.routes). A handler parses the request,
calls one service function and renders the answer."""

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from gateway.audio import speech as audio
from gateway.chat import service as chat, completions
from gateway.messages import count_tokens, service as messages
from gateway.embeddings import service as embeddings
from gateway.ops import health
from gateway.models import listing as models_route
from gateway.realtime import session as realtime
from gateway.audio import transcription, upload
from gateway.edge.bodies import NO_STORE, json_response, parse_body
from gateway.dashboard import routes as dashboard_routes
from gateway.music import routes as music_routes
from gateway.music.request import MAX_BODY_BYTES as MUSIC_BODY_BYTES
from gateway.responses import routes as responses_routes
from gateway.edge.openapi import build as build_openapi
from gateway.edge.state import CALLER, DOCUMENT, FACTS, METRICS, SERVICES

MAX_BODY_BYTES = MUSIC_BODY_BYTES  # the largest any route accepts: music's reference images
CHAT_BODY_BYTES = 32 * 1024 * 1024


async def health_check(request: web.Request) -> web.Response:
    skip = {part.strip() for part in request.query.get("skip", "").split(",") if part.strip()}
    status, body = await health.report(request.app[SERVICES], skip)
    return json_response(body, status, headers=NO_STORE)


async def list_models(request: web.Request) -> web.Response:
    body = models_route.list_body(request.app[SERVICES].catalogue, request.query, request.headers)
    return web.Response(body=body, content_type="application/json")


async def get_model(request: web.Request) -> web.Response:
    """One model by id, alias or provider/model (the openai and anthropic SDKs' retrieve)."""
    body = models_route.model_body(request.app[SERVICES].catalogue, request.match_info["model_id"],
                                   request.headers)
    return web.Response(body=body, content_type="application/json")


async def create_completion(request: web.Request) -> web.StreamResponse:
    """OpenAI's legacy text completions, for models of kind completion."""
    raw, parsed = await parse_body(request, completions.CompletionRequest, CHAT_BODY_BYTES)
    request[FACTS].update(model=parsed.model, stream=parsed.stream)
    services, caller = request.app[SERVICES], request[CALLER]
    if not parsed.stream:
        return json_response(await completions.complete(services, caller, raw, parsed))
    relay = await completions.open_stream(services, caller, raw, parsed)
    return await relay.send(request)


async def count_message_tokens(request: web.Request) -> web.Response:
    """Anthropic's messages.count_tokens: the provider's own count, never charged."""
    raw, parsed = await parse_body(request, count_tokens.CountTokensRequest, CHAT_BODY_BYTES)
    request[FACTS].update(model=parsed.model)
    return json_response(await count_tokens.count(request.app[SERVICES], request[CALLER], raw, parsed))


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
    session = await realtime.open_session(request.app[SERVICES], request[CALLER], model,
                                          beta=realtime.wants_beta(request))
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
    """Multipart, read part by part: the file goes upstream as it arrives (see gateway.audio.upload)."""
    form = await upload.open_form(request)
    body, content_type = await transcription.transcribe(request.app[SERVICES], request[CALLER], form)
    charset = "utf-8" if content_type == "text/plain" else None
    return web.Response(body=body, content_type=content_type, charset=charset)


async def openapi_document(request: web.Request) -> web.Response:
    return web.Response(body=request.app[DOCUMENT], content_type="application/json")


async def metrics(request: web.Request) -> web.Response:
    """Prometheus text format; every worker's samples summed (see gateway.ops.metrics)."""
    services = request.app[SERVICES]
    body = await request.app[METRICS].render(services.recorder, services.router.circuits.states())
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


def setup_routes(app: web.Application) -> None:
    app.router.add_get("/", health_check)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/openapi.json", openapi_document)
    app.router.add_get("/v1/models", list_models)
    app.router.add_get("/v1/models/{model_id:.+}", get_model)
    app.router.add_post("/v1/completions", create_completion)
    app.router.add_post("/v1/messages/count_tokens", count_message_tokens)
    app.router.add_post("/v1/chat/completions", chat_completions)
    app.router.add_post("/v1/messages", create_message)
    app.router.add_post("/v1/embeddings", create_embeddings)
    app.router.add_post("/v1/audio/speech", create_speech)
    app.router.add_post("/v1/audio/transcriptions", create_transcription, expect_handler=upload.expect_continue)
    app.router.add_get("/v1/realtime", realtime_session)
    responses_routes.setup_routes(app)
    music_routes.setup_routes(app)
    dashboard_routes.setup_routes(app)
    app.on_startup.append(build_openapi)  # after the catalogue is loaded (cleanup contexts run first)
