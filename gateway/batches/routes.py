"""The batch routes, in OpenAI's shape (/v1/batches) and Anthropic's (/v1/messages/batches, its
errors in Anthropic's shape). Each handler parses, calls one function of gateway.batches.service,
and renders (gateway.batches.shapes)."""

import msgspec
from aiohttp import web

from gateway.batches import service, shapes
from gateway.batches.service import BatchRequest, MessageBatchRequest
from gateway.edge.bodies import NO_STORE, _param_of, json_response, parse_body, read_body
from gateway.edge.errors import Dialect, bad_request
from gateway.edge.parsing import WholeNumber
from gateway.edge.routes import Endpoint, JsonBody, Param
from gateway.edge.state import CALLER, SERVICES

OPENAI = "/v1/batches"
ANTHROPIC = "/v1/messages/batches"
OPENAI_BODY = JsonBody(BatchRequest, 64 * 1024)
ANTHROPIC_BODY = JsonBody(MessageBatchRequest, 256 * 1024 * 1024)  # Anthropic's most
LIMIT = WholeNumber("limit", 1, 100, 20, "batches to list")
decode_message_batch = msgspec.json.Decoder(MessageBatchRequest).decode


async def create_batch(request: web.Request) -> web.Response:
    _, parsed = await parse_body(request, OPENAI_BODY)
    row = await service.create_openai(request.app[SERVICES], request[CALLER], parsed)
    return json_response(shapes.openai_batch(row))


async def get_batch(request: web.Request) -> web.Response:
    row = await service.owned(request.app[SERVICES], request[CALLER], request.match_info["batch_id"], "openai")
    return json_response(shapes.openai_batch(row), headers=NO_STORE)


async def cancel_batch(request: web.Request) -> web.Response:
    row = await service.cancel(request.app[SERVICES], request[CALLER], request.match_info["batch_id"], "openai")
    return json_response(shapes.openai_batch(row))


async def list_batches(request: web.Request) -> web.Response:
    limit = LIMIT.read(request.query)
    rows = await service.listing(request.app[SERVICES], request[CALLER], "openai", limit, request.query.get("after"))
    data = [shapes.openai_batch(row) for row in rows[:limit]]
    return json_response({"object": "list", "data": data, "first_id": data[0]["id"] if data else None,
                          "last_id": data[-1]["id"] if data else None, "has_more": len(rows) > limit},
                         headers=NO_STORE)


async def create_message_batch(request: web.Request) -> web.Response:
    try:
        parsed = decode_message_batch(await read_body(request, ANTHROPIC_BODY.limit))
    except msgspec.ValidationError as exc:
        raise bad_request(f"invalid request: {exc}", _param_of(exc)) from None
    except msgspec.DecodeError:
        raise bad_request("the request body is not valid JSON") from None
    row = await service.create_anthropic(request.app[SERVICES], request[CALLER], parsed)
    return json_response(shapes.anthropic_batch(row, _base(request)))


def _base(request: web.Request) -> str:
    return str(request.url.origin())


async def get_message_batch(request: web.Request) -> web.Response:
    row = await service.owned(request.app[SERVICES], request[CALLER], request.match_info["batch_id"], "anthropic")
    return json_response(shapes.anthropic_batch(row, _base(request)), headers=NO_STORE)


async def cancel_message_batch(request: web.Request) -> web.Response:
    row = await service.cancel(request.app[SERVICES], request[CALLER], request.match_info["batch_id"], "anthropic")
    return json_response(shapes.anthropic_batch(row, _base(request)))


async def message_batch_results(request: web.Request) -> web.StreamResponse:
    chunks = await service.results(request.app[SERVICES], request[CALLER], request.match_info["batch_id"])
    response = web.StreamResponse(headers={"Content-Type": "application/binary", **NO_STORE})
    await response.prepare(request)
    async for chunk in chunks:
        await response.write(chunk)
    await response.write_eof()
    return response


async def list_message_batches(request: web.Request) -> web.Response:
    limit = LIMIT.read(request.query)
    rows = await service.listing(request.app[SERVICES], request[CALLER], "anthropic", limit,
                                 request.query.get("after_id"))
    data = [shapes.anthropic_batch(row, _base(request)) for row in rows[:limit]]
    return json_response({"data": data, "has_more": len(rows) > limit, "first_id": data[0]["id"] if data else None,
                          "last_id": data[-1]["id"] if data else None}, headers=NO_STORE)


ONE, MESSAGE_ONE = OPENAI + "/{batch_id}", ANTHROPIC + "/{batch_id}"
ENDPOINTS = (
    Endpoint("POST", OPENAI, create_batch, "Create a batch (OpenAI's Batch API)", body=OPENAI_BODY),
    Endpoint("GET", OPENAI, list_batches, "The organization's batches",
             query=(Param.whole(LIMIT), Param("after"))),
    Endpoint("GET", ONE, get_batch, "A batch"),
    Endpoint("POST", ONE + "/cancel", cancel_batch, "Cancel a batch"),
    Endpoint("POST", ANTHROPIC, create_message_batch, "Create a message batch (Anthropic's Message Batches)",
             body=ANTHROPIC_BODY, dialect=Dialect.ANTHROPIC),
    Endpoint("GET", ANTHROPIC, list_message_batches, "The organization's message batches",
             dialect=Dialect.ANTHROPIC, query=(Param.whole(LIMIT), Param("after_id"), Param("before_id"))),
    Endpoint("GET", MESSAGE_ONE, get_message_batch, "A message batch", dialect=Dialect.ANTHROPIC),
    Endpoint("POST", MESSAGE_ONE + "/cancel", cancel_message_batch, "Cancel a message batch",
             dialect=Dialect.ANTHROPIC),
    Endpoint("GET", MESSAGE_ONE + "/results", message_batch_results, "A message batch's results (JSONL)",
             dialect=Dialect.ANTHROPIC, answers={"200": ("application/binary",)}),
)
