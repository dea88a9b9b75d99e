"""POST /v1/completions: legacy text completions for models of kind completion, billed as chat."""

import asyncio
from decimal import Decimal

import pytest

from simulator.textgen import completion_text
from tests.support import auth, poll, request_events, sse_lines, upstream_requests

openai = pytest.importorskip("openai")

MODEL = "gpt-3.5-turbo-instruct"
PROMPT_PRICE, COMPLETION_PRICE, RATE = Decimal("0.0000015"), Decimal("0.000002"), Decimal("84.0")


def cost_inr(prompt_tokens: int, completion_tokens: int) -> Decimal:
    return (prompt_tokens * PROMPT_PRICE + completion_tokens * COMPLETION_PRICE) * RATE


@pytest.fixture
def client(gateway, org):
    return openai.AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=org["api_key"], max_retries=0)


async def test_sdk_completes_and_the_request_is_billed_exactly(client, gateway, org, simulator):
    reply = await client.completions.create(model=MODEL, prompt="say three words [sim:tokens=5]", max_tokens=20)
    assert reply.object == "text_completion" and reply.choices[0].text == completion_text(5)
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (4, 5)
    (event,) = await request_events(gateway)
    assert (event.route, event.model, event.status, event.stream) == ("/v1/completions", MODEL, 200, False)
    assert Decimal(event.charged_inr_nano) / 10**9 == cost_inr(4, 5)
    assert await gateway.balance(org["org_id"]) == Decimal(100) - cost_inr(4, 5)
    assert Decimal(str(reply.usage.model_extra["cost_inr"])) == cost_inr(4, 5)
    (sent,) = await upstream_requests(gateway, simulator)
    assert (sent["path"], sent["body"]["model"], sent["body"]["max_tokens"]) == ("/v1/completions", MODEL, 20)


async def test_sdk_streams_with_usage_and_the_stream_is_billed(client, gateway, org):
    stream = await client.completions.create(model=MODEL, prompt="a b [sim:tokens=4]", stream=True,
                                             stream_options={"include_usage": True})
    chunks = [chunk async for chunk in stream]
    assert "".join(c.choices[0].text for c in chunks if c.choices) == completion_text(4)
    usage = chunks[-1].usage
    assert (usage.prompt_tokens, usage.completion_tokens) == (3, 4)
    assert Decimal(str(usage.model_extra["cost_inr"])) == cost_inr(3, 4)
    (event,) = await request_events(gateway)
    assert (event.route, event.status, event.stream, event.completion_tokens) == ("/v1/completions", 200, True, 4)
    assert await gateway.balance(org["org_id"]) == Decimal(100) - cost_inr(3, 4)


async def test_a_stream_without_include_usage_is_still_billed_and_ends_with_done(gateway, org):
    body = {"model": MODEL, "prompt": "x [sim:tokens=3]", "stream": True}
    lines = await sse_lines(await gateway.client.post("/v1/completions", json=body, headers=auth(org["api_key"])))
    assert lines[-1] == b"[DONE]" and not any(b'"usage":{' in line for line in lines)
    (event,) = await request_events(gateway)
    assert (event.status, event.completion_tokens) == (200, 3) and event.charged_inr_nano > 0


async def test_upstream_failure_is_a_gateway_error_and_not_charged(client, gateway, org):
    with pytest.raises(openai.RateLimitError) as caught:
        await client.completions.create(model=MODEL, prompt="x [sim:status=429]")
    assert caught.value.body["code"] == "gateway_error"
    (event,) = await request_events(gateway)
    assert (event.route, event.status, event.charged_inr_nano) == ("/v1/completions", 429, 0)
    assert await gateway.balance(org["org_id"]) == 100


async def test_a_mid_stream_drop_is_recorded_not_charged_and_told_in_the_stream(gateway, org):
    body = {"model": MODEL, "prompt": "x [sim:tokens=8] [sim:drop_after=2]", "stream": True}
    lines = await sse_lines(await gateway.client.post("/v1/completions", json=body, headers=auth(org["api_key"])))
    assert b"gateway_error" in lines[-2] and lines[-1] == b"[DONE]"
    (event,) = await request_events(gateway)
    assert (event.status, event.charged_inr_nano) == (502, 0)


async def test_a_client_that_leaves_mid_stream_is_billed_499_for_what_it_was_sent(gateway, org, simulator):
    body = {"model": MODEL, "prompt": "go [sim:tokens=10] [sim:hang_after=2]", "stream": True}
    response = await gateway.client.post("/v1/completions", json=body, headers=auth(org["api_key"]))
    received = b""
    while received.count(b"text_completion") < 2:
        received += await asyncio.wait_for(response.content.readany(), 5)
    response.close()
    (event,) = await poll(lambda: request_events(gateway))
    assert (event.route, event.status, event.completion_tokens) == ("/v1/completions", 499, 2)
    assert event.charged_inr_nano == event.cost_inr_nano > 0


@pytest.mark.parametrize(("body", "param", "says"), [
    ({"model": "gpt-4o-mini", "prompt": "hi"}, "model", "use POST /v1/chat/completions"),
    ({"model": "no-such-model", "prompt": "hi"}, "model", "unknown model"),
    ({"model": MODEL}, "prompt", "prompt"),
    ({"model": MODEL, "prompt": "hi", "max_tokens": 0}, "max_tokens", ">= 1"),
])
async def test_invalid_requests_are_400_before_any_upstream_call(gateway, org, simulator, body, param, says):
    response = await gateway.client.post("/v1/completions", json=body, headers=auth(org["api_key"]))
    assert response.status == 400
    error = (await response.json())["error"]
    assert error["param"] == param and says in error["message"]
    assert await upstream_requests(gateway, simulator) == []


async def test_other_routes_refuse_the_completion_model_naming_its_route(gateway, org):
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
    response = await gateway.client.post("/v1/chat/completions", json=body, headers=auth(org["api_key"]))
    assert response.status == 400
    assert "use POST /v1/completions" in (await response.json())["error"]["message"]


async def test_no_credit_is_402_before_the_body(gateway, simulator):
    broke = await gateway.new_org("0")
    response = await gateway.client.post("/v1/completions", json={"model": MODEL, "prompt": "x"},
                                         headers=auth(broke["api_key"]))
    assert response.status == 402
    assert await upstream_requests(gateway, simulator) == []
