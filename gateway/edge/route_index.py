"""A request no route matches: the 404 names the nearest route the router serves, so a typo
("POST /v1/chat/completion") is answered with the route meant, not a bare "Not Found"."""

import difflib

from aiohttp import web

from gateway.edge.errors import ApiError
from gateway.edge.openapi import routes

CUTOFF = 0.6  # difflib's similarity below which no route is suggested
LONGEST = 200  # characters of the request line compared and quoted (difflib is quadratic)


def served_routes(router: web.UrlDispatcher) -> list[str]:
    """`METHOD /path` of every route, as the OpenAPI document lists them."""
    return [f"{method} {path}" for method, path in routes(router)]


def no_route_matched(request: web.Request) -> bool:
    """Whether the router found no resource for the path (not a handler's own 404)."""
    return request.match_info.http_exception is not None


def unknown_route(request: web.Request) -> ApiError:
    """The 404 for `request`, naming the nearest served route when one is close."""
    asked = f"{request.method} {request.path}"[:LONGEST]
    nearest = difflib.get_close_matches(asked, served_routes(request.app.router), n=1, cutoff=CUTOFF)
    hint = f"; did you mean {nearest[0]}?" if nearest else "; GET /openapi.json lists every route"
    return ApiError(404, f"no route {asked}{hint}", type="not_found")
