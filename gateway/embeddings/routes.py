"""The embeddings route: POST /v1/embeddings (paid)."""

from aiohttp import web

from gateway.edge.bodies import json_response, parse_body
from gateway.edge.routes import Endpoint, JsonBody
from gateway.edge.state import CALLER, FACTS, SERVICES
from gateway.embeddings import service as embeddings

BODY = JsonBody(embeddings.EmbeddingRequest, embeddings.BODY_BYTES)


async def create_embeddings(request: web.Request) -> web.Response:
    raw, parsed = await parse_body(request, BODY)
    request[FACTS].update(model=parsed.model)
    return json_response(await embeddings.create(request.app[SERVICES], request[CALLER], raw, parsed))


ENDPOINTS = (
    Endpoint("POST", embeddings.ROUTE, create_embeddings, "Embeddings", body=BODY, paid=True,
             model_kind="embedding", kind_home=True),
)
