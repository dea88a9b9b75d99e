"""The catalogue's routes: GET /v1/models and GET /v1/models/{model_id}, public (the openai and
anthropic SDKs' list and retrieve)."""

from aiohttp import web

from gateway.edge.routes import Endpoint, Param
from gateway.edge.state import SERVICES
from gateway.models import listing

PATH = "/v1/models"
BOOL_WORD = {"type": "string", "description": "true when one of 1, true, yes, on"}


async def list_models(request: web.Request) -> web.Response:
    body = listing.list_body(request.app[SERVICES].catalogue, request.query, request.headers)
    return web.Response(body=body, content_type="application/json")


async def get_model(request: web.Request) -> web.Response:
    """One model by id, alias or provider/model (the openai and anthropic SDKs' retrieve)."""
    body = listing.model_body(request.app[SERVICES].catalogue, request.match_info["model_id"], request.headers)
    return web.Response(body=body, content_type="application/json")


ENDPOINTS = (
    Endpoint("GET", PATH, list_models, "The catalogue", public=True, query=(
        Param("include_deactivated", BOOL_WORD), Param("exclude_deprecated", BOOL_WORD),
        Param.whole(listing.PAGE), Param("after_id"), Param("before_id"))),
    # The placeholder takes the rest of the path: a provider/model id holds a slash.
    Endpoint("GET", PATH + "/{model_id:.+}", get_model, "One model, by id, alias or provider/model",
             public=True),
)
