"""An unknown route answers the JSON error body (404, not_found) naming the nearest real route;
a known path with the wrong method keeps its 405 and Allow."""

import pytest

from tests.support import auth


@pytest.mark.parametrize(("method", "path", "meant"), [
    ("POST", "/v1/chat/completion", "POST /v1/chat/completions"),
    ("POST", "/v1/embedding", "POST /v1/embeddings"),
    ("GET", "/v1/model", "GET /v1/models"),
    ("POST", "/v1/message/count_tokens", "POST /v1/messages/count_tokens"),
])
async def test_a_typo_is_a_json_404_naming_the_route_meant(gateway, org, method, path, meant):
    response = await gateway.client.request(method, path, headers=auth(org["api_key"]))
    assert response.status == 404 and response.content_type == "application/json"
    error = (await response.json())["error"]
    assert error["type"] == "not_found"
    assert error["message"] == f"no route {method} {path}; did you mean {meant}?"


async def test_without_a_key_the_404_is_still_json(gateway):
    response = await gateway.client.get("/v2/nothing/like/any/route/at/all")
    assert response.status == 404
    error = (await response.json())["error"]
    assert error["type"] == "not_found" and "GET /openapi.json lists every route" in error["message"]


async def test_a_handlers_own_404_keeps_its_message(gateway, org):
    response = await gateway.client.get("/v1/models/no-such-model")
    assert response.status == 404
    assert "no route" not in (await response.json())["error"]["message"]


async def test_the_wrong_method_keeps_405_and_allow(gateway, org):
    response = await gateway.client.get("/v1/chat/completions", headers=auth(org["api_key"]))
    assert response.status == 405 and response.headers["Allow"] == "POST"
    assert (await response.json())["error"]["type"] == "method_not_allowed"
