"""One route table (issue 26, Deliver point 2): each endpoint is declared once (gateway.routes
lists every family's), the router serves exactly the declared ones (that the edge imports no API
family: tests/test_architecture.py), and what the middleware reads of an endpoint (public or keyed, paid, error dialect)
holds over HTTP for every route."""

from typing import get_args

import pytest
from aiohttp import web

from gateway.app import create_app
from gateway.catalogue import Kind
from gateway.edge.errors import Dialect
from gateway.edge.routes import Endpoint, RouteTable
from gateway.edge.state import ROUTES
from gateway.routes import ENDPOINTS
from tests.support import auth



def example_path(endpoint: Endpoint) -> str:
    """A concrete path the endpoint's route matches: each placeholder as `x`."""
    return "/".join("x" if part.startswith("{") else part for part in endpoint.template.split("/"))


def test_every_registered_route_has_one_endpoint_and_every_endpoint_its_routes(config):
    app = create_app(config)
    table = app[ROUTES]
    routes = list(app.router.routes())
    assert all(table.endpoint_of(route) is not None for route in routes)
    for endpoint in ENDPOINTS:
        methods = sorted(route.method for route in routes if table.endpoint_of(route) is endpoint)
        assert methods == (["GET", "HEAD"] if endpoint.method == "GET" else [endpoint.method]), endpoint.line
    assert len(table.endpoints) == len(ENDPOINTS) == len({endpoint.line for endpoint in ENDPOINTS})


def test_a_route_declared_twice_is_refused():
    async def handler(_request: web.Request) -> web.Response:
        return web.Response()

    twice = [Endpoint("GET", "/v1/thing", handler, "a thing")] * 2
    with pytest.raises(ValueError, match="declared twice"):
        RouteTable(web.UrlDispatcher(), twice)


def test_each_model_kind_has_one_home_route(config):
    homes = create_app(config)[ROUTES].kind_homes()
    assert set(homes) == set(get_args(Kind))
    assert homes["chat"] == "POST /v1/chat/completions" and homes["realtime"] == "GET /v1/realtime"


def test_a_route_whose_dialect_is_not_its_paths_is_refused():
    async def handler(_request: web.Request) -> web.Response:
        return web.Response()

    for endpoint in (Endpoint("POST", "/v1/other", handler, "x", dialect=Dialect.ANTHROPIC),
                     Endpoint("POST", "/v1/messages/batches", handler, "x")):
        with pytest.raises(ValueError, match="speaks"):
            RouteTable(web.UrlDispatcher(), [endpoint])


def test_paths_no_route_answers_keep_their_rules(config):
    table = create_app(config)[ROUTES]
    keyed = ("/v1/nothing", "/v1/", "/v1/modelsx", "/v1/messages/nothing", "/v1/chat/completions/x")
    public = ("/v1/models/", "/v1/models/a/b", "/nothing", "/v1", "/dashboard/x", "/media/")
    assert [table.unrouted(path).public for path in keyed] == [False] * len(keyed)
    assert [table.unrouted(path).public for path in public] == [True] * len(public)
    assert table.unrouted("/v1/messages/nothing").dialect is Dialect.ANTHROPIC
    assert table.unrouted("/v1/messagesx").dialect is Dialect.OPENAI
    assert table.unrouted("/v1/realtime").key_in_subprotocol and not table.unrouted("/v1/realtimex").key_in_subprotocol
    assert not any(table.unrouted(endpoint.path).paid for endpoint in ENDPOINTS)


def shape(body: dict) -> Dialect:
    return Dialect.ANTHROPIC if body.get("type") == "error" and "request_id" in body else Dialect.OPENAI


async def test_without_a_key_public_routes_answer_and_keyed_ones_refuse_in_their_dialect(gateway):
    for endpoint in ENDPOINTS:
        response = await gateway.client.request(endpoint.method, example_path(endpoint))
        assert (response.status != 401) is endpoint.public, endpoint.line
        if response.status == 401:
            assert shape(await response.json()) is endpoint.dialect, endpoint.line
            assert ("request-id" in response.headers) is (endpoint.dialect is Dialect.ANTHROPIC)


async def test_a_broke_org_hears_402_before_its_body_on_paid_routes_only(gateway):
    broke = await gateway.new_org("0")
    for endpoint in (endpoint for endpoint in ENDPOINTS if endpoint.method in ("POST", "PATCH")):
        response = await gateway.client.request(endpoint.method, example_path(endpoint), data=b"{not json",
                                                headers={**auth(broke["api_key"]), "Content-Type": "application/json"})
        assert (response.status == 402) is endpoint.paid, (endpoint.line, response.status)
        assert shape(await response.json()) is endpoint.dialect, endpoint.line


async def test_an_unknown_path_under_the_messages_routes_is_an_anthropic_404(gateway, org):
    response = await gateway.client.post("/v1/messages/nothing", json={}, headers=auth(org["api_key"]))
    body = await response.json()
    assert response.status == 404 and shape(body) is Dialect.ANTHROPIC and body["error"]["type"] == "not_found_error"
    assert response.headers["request-id"] == response.headers["X-Request-Id"]
