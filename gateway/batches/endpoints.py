"""The routes a batch line may be for, each as its single route reads, checks and answers a body:
its schema, the model kind it serves, the line's worst case on a model (raising the single route's
400 for a body it would refuse before any upstream call), and the single route's own service
function, which a gateway-run line goes through whole (gateway.batches.gateway_run)."""

from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from gateway.catalogue import Resolved
from gateway.chat import completions, service as chat
from gateway.chat.request import ChatRequest
from gateway.embeddings import service as embeddings
from gateway.messages import service as messages
from gateway.messages.request import MessagesRequest
from gateway.resolution import CHAT, COMPLETION, EMBEDDING, Capability, Served
from gateway.responses import service as responses
from gateway.responses.request import ResponsesRequest, check
from gateway.services import Caller, Services

Ceiling = Callable[[Resolved], int]
# A line's worst case on each model it may be sent to; it raises ApiError for a body the route refuses.
Check = Callable[[Services, Caller, dict, Any, list[Served]], Awaitable[Ceiling]]
Run = Callable[[Services, Caller, dict, Any], Awaitable[dict]]


class LineRoute(msgspec.Struct, frozen=True):
    """One route a batch may be for."""

    path: str
    schema: type
    capability: Capability
    check: Check
    run: Run


async def _chat(services: Services, caller: Caller, body: dict, request: ChatRequest, served: list[Served]) -> Ceiling:
    chat.with_token_limit(request)(served)  # Claude refuses a request without max_tokens (spec 7)
    return chat.ceiling(services, body)


async def _completion(services: Services, caller: Caller, body: dict, request: completions.CompletionRequest,
                      served: list[Served]) -> Ceiling:
    return completions.ceiling(services, body)


async def _embedding(services: Services, caller: Caller, body: dict, request: embeddings.EmbeddingRequest,
                     served: list[Served]) -> Ceiling:
    items = embeddings.inputs_of(request.input)
    embeddings.check_dimensions(served[0].model, request.dimensions)
    return embeddings.ceiling(services, items)


async def _response(services: Services, caller: Caller, body: dict, request: ResponsesRequest,
                    served: list[Served]) -> Ceiling:
    check(request)
    return (await responses.prepare(services, caller, dict(body), request)).ceiling()


async def _message(services: Services, caller: Caller, body: dict, request: MessagesRequest,
                   served: list[Served]) -> Ceiling:
    return messages.Sent(services, body).ceiling()


ROUTES: dict[str, LineRoute] = {route.path: route for route in (
    LineRoute(chat.ROUTE, ChatRequest, CHAT, _chat, chat.complete),
    LineRoute(embeddings.ROUTE, embeddings.EmbeddingRequest, EMBEDDING, _embedding, embeddings.create),
    LineRoute(responses.ROUTE, ResponsesRequest, CHAT, _response, responses.create),
    LineRoute(completions.ROUTE, completions.CompletionRequest, COMPLETION, _completion, completions.complete),
    LineRoute(messages.ROUTE, MessagesRequest, CHAT, _message, messages.create),
)}
OPENAI_ENDPOINTS = (chat.ROUTE, embeddings.ROUTE, responses.ROUTE, completions.ROUTE)
