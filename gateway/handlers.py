"""HTTP handlers: parse the request, call one service function, render the answer."""

from typing import TypeVar

import msgspec
from aiohttp import web

from gateway import chat, health
from gateway.errors import bad_request
from gateway.jsonio import encode, loads
from gateway.state import CALLER, LOG_FIELDS, SERVICES

T = TypeVar("T")
TRUE_WORDS = frozenset({"1", "true", "yes", "on"})


def json_response(body: object, status: int = 200, headers: dict | None = None) -> web.Response:
    return web.Response(status=status, body=encode(body), content_type="application/json", headers=headers)


async def parse_body(request: web.Request, schema: type[T]) -> tuple[dict, T]:
    """The JSON body as a dict (passed upstream) and as the validated `schema`."""
    try:
        raw = loads(await request.read())
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
    raw, parsed = await parse_body(request, chat.ChatRequest)
    request[LOG_FIELDS].update(model=parsed.model, stream=parsed.stream)
    services, caller = request.app[SERVICES], request[CALLER]
    if not parsed.stream:
        return json_response(await chat.complete(services, caller, raw, parsed))
    relay = await chat.open_stream(services, caller, raw, parsed)
    return await relay.send(request)


def setup_routes(app: web.Application) -> None:
    app.router.add_get("/", health_check)
    app.router.add_get("/v1/models", list_models)
    app.router.add_post("/v1/chat/completions", chat_completions)
