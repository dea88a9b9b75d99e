"""The Responses API's routes: POST /v1/responses (paid) and GET /v1/responses/{response_id}."""

from aiohttp import web

from gateway.edge.bodies import NO_STORE, json_response, whole_or_streamed
from gateway.edge.routes import Endpoint, JsonBody
from gateway.edge.state import CALLER, SERVICES
from gateway.responses import service
from gateway.chat.request import BODY_BYTES
from gateway.responses.request import ResponsesRequest

BODY = JsonBody(ResponsesRequest, BODY_BYTES)


async def create_response(request: web.Request) -> web.StreamResponse:
    return await whole_or_streamed(request, BODY, service.create, service.open_stream)


async def get_response(request: web.Request) -> web.Response:
    response_id = request.match_info["response_id"]
    return json_response(await service.retrieve(request.app[SERVICES], request[CALLER], response_id),
                         headers=NO_STORE)


ENDPOINTS = (
    Endpoint("POST", service.ROUTE, create_response,
             "A response (OpenAI's Responses API) for every chat model, whole or streamed", body=BODY, paid=True,
             model_kind="chat", answers={"200": ("application/json", "text/event-stream")}),
    Endpoint("GET", service.ROUTE + "/{response_id}", get_response, "A stored response"),
)
