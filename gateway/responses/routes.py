"""The Responses API's routes: POST /v1/responses and GET /v1/responses/{response_id}."""

from aiohttp import web

from gateway.edge.bodies import NO_STORE, json_response, parse_body
from gateway.responses import service
from gateway.responses.request import BODY_BYTES, ResponsesRequest
from gateway.edge.state import CALLER, FACTS, SERVICES


async def create_response(request: web.Request) -> web.StreamResponse:
    raw, parsed = await parse_body(request, ResponsesRequest, BODY_BYTES)
    request[FACTS].update(model=parsed.model, stream=parsed.stream)
    services, caller = request.app[SERVICES], request[CALLER]
    if not parsed.stream:
        return json_response(await service.create(services, caller, raw, parsed))
    relay = await service.open_stream(services, caller, raw, parsed)
    return await relay.send(request)


async def get_response(request: web.Request) -> web.Response:
    response_id = request.match_info["response_id"]
    return json_response(await service.retrieve(request.app[SERVICES], request[CALLER], response_id),
                         headers=NO_STORE)


def setup_routes(app: web.Application) -> None:
    app.router.add_post(service.ROUTE, create_response)
    app.router.add_get(service.ROUTE + "/{response_id}", get_response)
