"""The catalogue's routes: GET /v1/models and GET /v1/models/{model_id}, public (the openai and
anthropic SDKs' list and retrieve), and GET /v1/prices/{version}: a price version's prices and
when it was in force, for anyone checking a bill against them."""

from aiohttp import web

from gateway.edge.errors import ApiError
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


async def get_prices(request: web.Request) -> web.Response:
    """A price version ever in force (or scheduled): every price of it and its effective spans."""
    services, version = request.app[SERVICES], request.match_info["version"]
    document = await services.catalogues.document(services.recorder, version)
    if document is None:
        raise ApiError(404, f"price version {version!r} was never in force here; GET /v1/models names"
                            " the version in force", type="not_found", param="version")
    return web.Response(body=document, content_type="application/json")


ENDPOINTS = (
    Endpoint("GET", PATH, list_models, "The catalogue", public=True, query=(
        Param("include_deactivated", BOOL_WORD), Param("exclude_deprecated", BOOL_WORD),
        Param.whole(listing.PAGE), Param("after_id"), Param("before_id"))),
    # The placeholder takes the rest of the path: a provider/model id holds a slash.
    Endpoint("GET", PATH + "/{model_id:.+}", get_model, "One model, by id, alias or provider/model",
             public=True),
    Endpoint("GET", "/v1/prices/{version}", get_prices, "A price version: its prices and when they were in force",
             public=True),
)
