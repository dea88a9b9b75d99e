"""What every route's handlers share: a request body read within its route's limit and the
process's body budget, decoded into its msgspec type (both declared once, as the route's
`JsonBody`, see gateway.edge.routes), and JSON answers rendered."""

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import msgspec
from aiohttp import web

from gateway.edge.errors import ApiError, bad_request
from gateway.jsonio import decode_body, encode
from gateway.edge.routes import JsonBody
from gateway.edge.state import BODY_HOLD, CALLER, FACTS, SERVICES

if TYPE_CHECKING:  # the services import the providers, whose modules import the edge
    from gateway.services import Caller, Services

T = TypeVar("T")
M = TypeVar("M", bound="ModelRequest")
BODY_CHUNK_BYTES = 256 * 1024
NO_STORE = {"Cache-Control": "no-store"}  # account data: never kept by a browser or a proxy


def json_response(body: object, status: int = 200, headers: dict | None = None) -> web.Response:
    return web.Response(status=status, body=encode(body), content_type="application/json", headers=headers)


async def read_body(request: web.Request, limit: int) -> bytearray:
    """The body, refused with 413 as soon as it is known to exceed `limit` (never buffered past it).
    Its bytes are drawn from the process's body budget before they are read (503 while it is
    spent, see gateway.edge.intake): a declared length at once, a chunked body as it arrives. Not
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


async def parse_body(request: web.Request, body: JsonBody[T]) -> tuple[dict, T]:
    """The JSON body as a dict (passed upstream) and as the validated `body.schema`."""
    try:
        raw = decode_body(await read_body(request, body.limit))
    except ValueError:
        raise bad_request("the request body is not valid JSON") from None
    if not isinstance(raw, dict):
        raise bad_request("the request body must be a JSON object")
    try:
        return raw, msgspec.convert(raw, body.schema)
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


class ModelRequest(Protocol):
    """A parsed request that names its model and may ask to stream."""

    @property
    def model(self) -> str: ...

    @property
    def stream(self) -> bool: ...


class Sendable(Protocol):
    async def send(self, http_request: web.Request) -> web.StreamResponse: ...


Whole = Callable[["Services", "Caller", dict, M], Awaitable[Any]]  # the answer, as JSON
Streamed = Callable[["Services", "Caller", dict, M], Awaitable[Sendable]]  # the stream, opened


async def whole_or_streamed(request: web.Request, body: JsonBody[M], whole: Whole[M], streamed: Streamed[M]
                            ) -> web.StreamResponse:
    """A route answered whole or streamed as its body asks: `whole`'s answer as JSON, or the stream
    `streamed` opens, sent (chat, completions, Messages, Responses)."""
    raw, parsed = await parse_body(request, body)
    request[FACTS].update(model=parsed.model, stream=parsed.stream)
    services, caller = request.app[SERVICES], request[CALLER]
    if not parsed.stream:
        return json_response(await whole(services, caller, raw, parsed))
    relay = await streamed(services, caller, raw, parsed)
    return await relay.send(request)
