"""Chat's routes: POST /v1/chat/completions and OpenAI's legacy POST /v1/completions, each whole
or streamed, both paid."""

from aiohttp import web

from gateway.chat import completions, service as chat
from gateway.chat.request import BODY_BYTES, ChatRequest
from gateway.edge.bodies import json_response, parse_body
from gateway.edge.routes import Endpoint, JsonBody
from gateway.edge.state import CALLER, FACTS, SERVICES

CHAT_BODY = JsonBody(ChatRequest, BODY_BYTES)
COMPLETION_BODY = JsonBody(completions.CompletionRequest, BODY_BYTES)
WHOLE_OR_STREAMED = {"200": ("application/json", "text/event-stream")}


async def chat_completions(request: web.Request) -> web.StreamResponse:
    raw, parsed = await parse_body(request, CHAT_BODY)
    request[FACTS].update(model=parsed.model, stream=parsed.stream)
    services, caller = request.app[SERVICES], request[CALLER]
    if not parsed.stream:
        return json_response(await chat.complete(services, caller, raw, parsed))
    relay = await chat.open_stream(services, caller, raw, parsed)
    return await relay.send(request)


async def create_completion(request: web.Request) -> web.StreamResponse:
    """OpenAI's legacy text completions, for models of kind completion."""
    raw, parsed = await parse_body(request, COMPLETION_BODY)
    request[FACTS].update(model=parsed.model, stream=parsed.stream)
    services, caller = request.app[SERVICES], request[CALLER]
    if not parsed.stream:
        return json_response(await completions.complete(services, caller, raw, parsed))
    relay = await completions.open_stream(services, caller, raw, parsed)
    return await relay.send(request)


ENDPOINTS = (
    Endpoint("POST", chat.ROUTE, chat_completions, "Chat completion, whole or streamed", body=CHAT_BODY,
             paid=True, model_kind="chat", kind_home=True, answers=WHOLE_OR_STREAMED),
    Endpoint("POST", completions.ROUTE, create_completion, "Legacy text completion, whole or streamed",
             body=COMPLETION_BODY, paid=True, model_kind="completion", kind_home=True, answers=WHOLE_OR_STREAMED),
)
