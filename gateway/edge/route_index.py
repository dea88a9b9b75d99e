"""A request no route matches: the 404 names the nearest route the app serves (its route table,
gateway.edge.routes), so a typo ("POST /v1/chat/completion") is answered with the route meant,
not a bare "Not Found"."""

import difflib

from aiohttp import web

from gateway.edge.errors import ApiError
from gateway.edge.state import ROUTES

CUTOFF = 0.6  # difflib's similarity below which no route is suggested
LONGEST = 200  # characters of the request line compared and quoted (difflib is quadratic)


def no_route_matched(request: web.Request) -> bool:
    """Whether the router found no resource for the path (not a handler's own 404)."""
    return request.match_info.http_exception is not None


def unknown_route(request: web.Request) -> ApiError:
    """The 404 for `request`, naming the nearest served route when one is close."""
    asked = f"{request.method} {request.path}"[:LONGEST]
    table = request.app.get(ROUTES)
    served = table.served if table is not None else ()  # an app of bare handlers has no table
    nearest = difflib.get_close_matches(asked, served, n=1, cutoff=CUTOFF)
    hint = f"; did you mean {nearest[0]}?" if nearest else "; GET /openapi.json lists every route"
    return ApiError(404, f"no route {asked}{hint}", type="not_found")
