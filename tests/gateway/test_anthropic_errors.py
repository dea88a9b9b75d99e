"""Errors on the Anthropic Messages routes come in Anthropic's shape, whichever way they arise
(authentication, credit, rate limits, body limits, bad input, unknown sub-routes, upstream
failures, the catch-all, a stream's error event), so the anthropic SDK raises its own error
classes; an upstream 529 "overloaded" reaches the client as 529 with its Retry-After, and the
SDK's retry on it fires. Other routes keep the OpenAI shape."""

import msgspec
import pytest
from aiohttp import web

from gateway.edge.errors import AnthropicErrorBody
from gateway.ops.metrics import Metrics
from gateway.edge.middleware import add_request_id, observe
from gateway.edge.state import METRICS
from ledger.recorder import LedgerUnavailable
from tests.support import auth, chat_body, post_chat, request_events, single_attempt, upstream_requests

anthropic = pytest.importorskip("anthropic")

CLAUDE = "claude-haiku-4-5"
MESSAGES = "/v1/messages"


pytestmark = pytest.mark.usefixtures("no_anthropic_env")


@pytest.fixture
async def gateway(make_gateway, config):
    """One attempt per request: Anthropic's own errors are the ones judged, never Bedrock's or
    Vertex's answer in their place (they serve the shipped Claude models too)."""
    return await make_gateway(single_attempt(config))


def sdk(gateway, key: str | None, retries: int = 0):
    return anthropic.AsyncAnthropic(base_url=gateway.url, api_key=key, max_retries=retries)


def ask(text: str = "hi") -> list[dict]:
    return [{"role": "user", "content": text}]


def message(text: str = "hi", model: str = CLAUDE, **extra) -> dict:
    return {"model": model, "max_tokens": 10, "messages": ask(text), **extra}


async def sdk_error(client, **extra):
    """The error the SDK raises for one messages.create call."""
    with pytest.raises(anthropic.APIStatusError) as caught:
        await client.messages.create(**{"model": CLAUDE, "max_tokens": 10, "messages": ask(), **extra})
    return caught.value


def assert_anthropic_shape(response_headers, body: dict, status_type: str) -> dict:
    """`body` is AnthropicErrorBody with `status_type`, naming the response's request id."""
    msgspec.convert(body, AnthropicErrorBody)
    assert body["type"] == "error" and body["error"]["type"] == status_type
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    assert body["request_id"] == response_headers["X-Request-Id"] == response_headers["request-id"]
    return body["error"]


# -- the edge: authentication, credit, limits, body size, input, routing -------------------------------

async def test_a_wrong_key_is_the_sdks_authentication_error(gateway):
    error = await sdk_error(sdk(gateway, "gwk_wrong"))
    assert isinstance(error, anthropic.AuthenticationError) and error.type == "authentication_error"
    assert error.request_id == error.body["request_id"] and error.request_id.startswith("req_")
    assert error.body["error"]["code"] == "invalid_api_key"


async def test_a_missing_key_is_an_authentication_error(gateway):
    response = await gateway.client.post(MESSAGES, json=message())
    assert response.status == 401
    assert_anthropic_shape(response.headers, await response.json(), "authentication_error")


async def test_no_credit_is_a_billing_error(gateway, simulator):
    org = await gateway.new_org("0")
    error = await sdk_error(sdk(gateway, org["api_key"]))
    assert error.status_code == 402 and error.type == "billing_error"
    assert error.body["error"]["code"] == "insufficient_credits"
    assert await upstream_requests(gateway, simulator) == []


async def test_a_rate_limited_key_gets_a_rate_limit_error_with_retry_after(make_gateway, config):
    limits = msgspec.structs.replace(config.limits, requests_per_minute=1)
    gateway = await make_gateway(msgspec.structs.replace(config, limits=limits))
    org = await gateway.new_org("100")
    client = sdk(gateway, org["api_key"])
    await client.messages.create(model=CLAUDE, max_tokens=10, messages=ask("hi [sim:tokens=1]"))
    error = await sdk_error(client)
    assert isinstance(error, anthropic.RateLimitError) and error.type == "rate_limit_error"
    assert 1 <= int(error.response.headers["Retry-After"]) <= 60


async def test_a_body_over_the_limit_is_request_too_large(make_gateway, config):
    server = msgspec.structs.replace(config.server, max_inflight_body_bytes=100_000, body_budget_wait_s=0.1)
    gateway = await make_gateway(msgspec.structs.replace(config, server=server))
    org = await gateway.new_org("10")
    response = await gateway.client.post(MESSAGES, json=message("x" * 200_000), headers=auth(org["api_key"]))
    assert response.status == 413
    assert_anthropic_shape(response.headers, await response.json(), "request_too_large")


@pytest.mark.parametrize(("body", "param"), [
    ({"model": CLAUDE, "messages": ask()}, "max_tokens"),
    (message(model="no-such-model"), "model"),
    ({"model": CLAUDE, "max_tokens": 0, "messages": ask()}, "max_tokens")])
async def test_bad_input_is_an_invalid_request_error_naming_the_field(gateway, org, simulator, body, param):
    response = await gateway.client.post(MESSAGES, json=body, headers={"x-api-key": org["api_key"]})
    assert response.status == 400
    error = assert_anthropic_shape(response.headers, await response.json(), "invalid_request_error")
    assert error["param"] == param
    assert await upstream_requests(gateway, simulator) == []


async def test_the_sdk_raises_bad_request_for_invalid_input(gateway, org):
    error = await sdk_error(sdk(gateway, org["api_key"]), model="no-such-model")
    assert isinstance(error, anthropic.BadRequestError) and error.type == "invalid_request_error"
    assert error.body["error"]["param"] == "model"


async def test_unknown_sub_routes_and_wrong_methods_answer_in_anthropics_shape(gateway, org):
    missing = await gateway.client.post(f"{MESSAGES}/no-such-thing", json={}, headers=auth(org["api_key"]))
    assert missing.status == 404
    assert_anthropic_shape(missing.headers, await missing.json(), "not_found_error")
    wrong = await gateway.client.get(MESSAGES, headers=auth(org["api_key"]))
    assert wrong.status == 405 and "POST" in wrong.headers["Allow"]
    assert_anthropic_shape(wrong.headers, await wrong.json(), "invalid_request_error")


async def test_other_routes_keep_the_openai_shape(gateway, org):
    response = await gateway.client.post("/v1/chat/completions", json={"model": "no-such-model", "messages": ask()},
                                         headers=auth(org["api_key"]))
    body = await response.json()
    assert response.status == 400 and set(body) == {"error"} and "request-id" not in response.headers
    assert (body["error"]["type"], body["error"]["param"]) == ("invalid_request_error", "model")
    beside = await gateway.client.post("/v1/messagesx", json={}, headers=auth(org["api_key"]))
    assert beside.status == 404 and set(await beside.json()) == {"error"}  # not under /v1/messages


# -- the catch-all and the ledger down, through the real middleware ------------------------------------

async def broken(_request: web.Request) -> web.Response:
    raise RuntimeError("a bug")


async def ledger_down(_request: web.Request) -> web.Response:
    raise LedgerUnavailable("database unreachable")


@pytest.fixture
async def bare(aiohttp_client):
    """The real observe middleware in front of handlers that fail, mounted at the Messages paths."""
    app = web.Application(middlewares=[observe])
    app[METRICS] = Metrics(30)
    app.on_response_prepare.append(add_request_id)
    app.router.add_post(MESSAGES, broken)
    app.router.add_post(f"{MESSAGES}/ledger", ledger_down)
    app.router.add_post("/v1/chat/completions", broken)
    return await aiohttp_client(app)


async def test_an_unexpected_failure_is_an_api_error_naming_the_request_id(bare):
    response = await bare.post(MESSAGES, json={})
    assert response.status == 500
    error = assert_anthropic_shape(response.headers, await response.json(), "api_error")
    assert response.headers["X-Request-Id"] in error["message"] and "a bug" not in error["message"]
    other = await bare.post("/v1/chat/completions", json={})
    assert (await other.json())["error"]["type"] == "server_error"


async def test_the_ledger_unavailable_is_a_503_to_retry(bare):
    response = await bare.post(f"{MESSAGES}/ledger", json={})
    assert response.status == 503 and response.headers["Retry-After"] == "1"
    assert_anthropic_shape(response.headers, await response.json(), "overloaded_error")


# -- upstream failures ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("model", "directive", "error_class", "status", "kind"), [
    (CLAUDE, "[sim:status=429]", anthropic.RateLimitError, 429, "rate_limit_error"),
    (CLAUDE, "[sim:status=500]", anthropic.InternalServerError, 502, "api_error"),
    ("gpt-4o-mini", "[sim:status=503]", anthropic.InternalServerError, 502, "api_error"),
    (CLAUDE, "[sim:status=400]", anthropic.BadRequestError, 400, "invalid_request_error")])
async def test_upstream_failures_keep_the_gateway_fields(gateway, org, model, directive, error_class, status, kind):
    error = await sdk_error(sdk(gateway, org["api_key"]), model=model, messages=ask(f"x {directive}"))
    assert isinstance(error, error_class) and (error.status_code, error.type) == (status, kind)
    assert error.body["error"]["code"] == "gateway_error" and error.body["error"]["requestedModel"] == model
    (event,) = await request_events(gateway)
    assert (event.status, event.charged_inr_nano) == (status, 0)


async def test_an_upstream_529_is_passed_through_and_the_sdk_retries_it(gateway, org, simulator):
    client = sdk(gateway, org["api_key"], retries=1)
    with pytest.raises(anthropic.OverloadedError) as caught:
        await client.messages.create(model=CLAUDE, max_tokens=10, messages=ask("x [sim:status=529]"))
    assert caught.value.status_code == 529 and caught.value.type == "overloaded_error"
    assert len(await upstream_requests(gateway, simulator)) == 2  # the SDK's first try and its retry
    events = await request_events(gateway)
    assert [(e.status, e.charged_inr_nano) for e in events] == [(529, 0), (529, 0)]
    assert await gateway.balance(org["org_id"]) == 100


CALLS = web.AppKey("calls", list)


async def overloaded(request: web.Request) -> web.Response:
    request.app[CALLS].append(request.path)
    return web.json_response({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
                             status=529, headers={"retry-after": "7"})


@pytest.fixture
async def overloaded_upstream(aiohttp_server, make_gateway, config):
    """A gateway whose Anthropic upstream answers every request 529 with `retry-after: 7`."""
    upstream = web.Application()
    upstream[CALLS] = []
    upstream.router.add_post("/v1/messages", overloaded)
    server = await aiohttp_server(upstream)
    anthropic_config = msgspec.structs.replace(config.providers["anthropic"], base_url=str(server.make_url("")))
    providers = {**config.providers, "anthropic": anthropic_config}
    return await make_gateway(single_attempt(msgspec.structs.replace(config, providers=providers))), upstream


@pytest.mark.parametrize("stream", [False, True])
async def test_a_529_keeps_its_retry_after_on_both_apis(overloaded_upstream, stream):
    gateway, upstream = overloaded_upstream
    org = await gateway.new_org("10")
    response = await gateway.client.post(MESSAGES, json=message(stream=stream), headers=auth(org["api_key"]))
    assert (response.status, response.headers["Retry-After"]) == (529, "7")
    assert_anthropic_shape(response.headers, await response.json(), "overloaded_error")
    chat = await post_chat(gateway, org, chat_body(model=CLAUDE, max_tokens=10, stream=stream))
    assert (chat.status, chat.headers["Retry-After"]) == (529, "7")  # the openai SDK retries any 5xx too
    assert (await chat.json())["error"]["type"] == "gateway_error"
    assert upstream[CALLS] == ["/v1/messages", "/v1/messages"]


async def test_an_error_mid_stream_is_anthropics_error_event(gateway, org):
    body = message("x [sim:drop_after=1]", stream=True)
    response = await gateway.client.post(MESSAGES, json=body, headers=auth(org["api_key"]))
    frames = [frame for frame in (await response.read()).split(b"\n\n") if frame]
    name, data = frames[-1].split(b"\n", 1)
    assert name == b"event: error"
    error = assert_anthropic_shape(response.headers, msgspec.json.decode(data.removeprefix(b"data: ")), "api_error")
    assert (error["code"], error["usedProvider"]) == ("gateway_error", "anthropic")


async def test_an_overloaded_event_mid_stream_raises_the_sdks_overloaded_error(gateway, org):
    client = sdk(gateway, org["api_key"])
    with pytest.raises(anthropic.APIStatusError) as caught:
        async with client.messages.stream(model=CLAUDE, max_tokens=50, messages=ask("x [sim:error_after=2]")) as s:
            await s.get_final_message()
    assert caught.value.type == "overloaded_error" and caught.value.body["error"]["code"] == "gateway_error"
    (event,) = await request_events(gateway)
    assert (event.status, event.charged_inr_nano) == (529, 0)


# -- the documented schema -----------------------------------------------------------------------------

async def test_the_openapi_document_names_anthropics_error_body_for_its_routes(gateway):
    doc = await (await gateway.client.get("/openapi.json")).json()
    messages = doc["paths"][MESSAGES]["post"]["responses"]
    assert messages["4XX"] == messages["5XX"] == {"$ref": "#/components/responses/AnthropicError"}
    assert doc["paths"]["/v1/chat/completions"]["post"]["responses"]["4XX"] == {"$ref": "#/components/responses/Error"}
    schema = doc["components"]["schemas"]["AnthropicErrorBody"]
    assert set(schema["required"]) == {"type", "error", "request_id"}
