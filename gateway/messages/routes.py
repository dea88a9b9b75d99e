"""Anthropic's Messages routes: POST /v1/messages (its SDK with base_url = the gateway root, for
every chat model; paid) and POST /v1/messages/count_tokens (free). Both answer errors in
Anthropic's shape and take the key as `x-api-key` too."""

from aiohttp import web

from gateway.chat.request import BODY_BYTES
from gateway.edge.bodies import json_response, parse_body, whole_or_streamed
from gateway.edge.errors import Dialect
from gateway.edge.routes import Endpoint, JsonBody
from gateway.edge.state import CALLER, FACTS, SERVICES
from gateway.messages import count_tokens, service as messages
from gateway.messages.request import MessagesRequest

MESSAGES_BODY = JsonBody(MessagesRequest, BODY_BYTES)
COUNT_BODY = JsonBody(count_tokens.CountTokensRequest, BODY_BYTES)


async def create_message(request: web.Request) -> web.StreamResponse:
    """Anthropic's Messages API (its SDK with base_url = the gateway root), for every chat model."""
    return await whole_or_streamed(request, MESSAGES_BODY, messages.create, messages.open_stream)


async def count_message_tokens(request: web.Request) -> web.Response:
    """Anthropic's messages.count_tokens: the provider's own count, never charged."""
    raw, parsed = await parse_body(request, COUNT_BODY)
    request[FACTS].update(model=parsed.model)
    return json_response(await count_tokens.count(request.app[SERVICES], request[CALLER], raw, parsed))


ENDPOINTS = (
    Endpoint("POST", messages.ROUTE, create_message, "Anthropic Messages for every chat model",
             body=MESSAGES_BODY, paid=True, dialect=Dialect.ANTHROPIC, model_kind="chat",
             answers={"200": ("application/json", "text/event-stream")}),
    Endpoint("POST", count_tokens.ROUTE, count_message_tokens,
             "A Messages request's input tokens, counted by its provider (Anthropic models; free)",
             body=COUNT_BODY, dialect=Dialect.ANTHROPIC, model_kind="chat"),
)
