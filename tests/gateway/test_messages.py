"""POST /v1/messages, driven by the official anthropic SDK with base_url = the gateway root:
native on Anthropic models, translated from and back to Anthropic's shape on the others, billed
and recorded like chat."""

import asyncio
from decimal import Decimal

import orjson
import pytest

from simulator.anthropic_messages import tool_input
from simulator.textgen import completion_text
from tests.support import PROVIDER_KEY, auth, decimal_json, poll, request_events, upstream_requests

anthropic = pytest.importorskip("anthropic")

CLAUDE, CLAUDE_UPSTREAM = "claude-haiku-4-5", "claude-haiku-4-5-20251001"
PRICES = {"claude-haiku-4-5": (Decimal("0.000001"), Decimal("0.000005")),
          "gpt-4o-mini": (Decimal("0.00000015"), Decimal("0.0000006"))}
RATE = Decimal("84.0")
WEATHER = {"name": "get_weather", "description": "Weather",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}


pytestmark = pytest.mark.usefixtures("no_anthropic_env")


@pytest.fixture
def sdk(gateway, org):
    return anthropic.AsyncAnthropic(base_url=gateway.url, api_key=org["api_key"], max_retries=0)


def ask(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def cost_inr(model: str, prompt_tokens: int, output_tokens: int) -> Decimal:
    prompt, completion = PRICES[model]
    return (prompt_tokens * prompt + output_tokens * completion) * RATE


async def raw_events(response) -> list[tuple[str, dict]]:
    frames = [frame for frame in (await response.read()).split(b"\n\n") if frame]
    return [(name.removeprefix(b"event: ").decode(), decimal_json(data.removeprefix(b"data: ")))
            for name, data in (frame.split(b"\n", 1) for frame in frames)]


# -- Anthropic models: native --------------------------------------------------------------------

async def test_create_on_claude_passes_the_request_through_and_bills_exactly(sdk, gateway, org, simulator):
    message = await sdk.messages.create(model=CLAUDE, max_tokens=50, system="Be brief.", metadata={"user_id": "u-1"},
                                        messages=ask("one two [sim:tokens=5]"))
    assert message.content[0].text == completion_text(5) and message.stop_reason == "end_turn"
    assert message.model == CLAUDE_UPSTREAM and message.id.startswith("msg_")
    assert (message.usage.input_tokens, message.usage.output_tokens) == ((2 + 4) + (3 + 4), 5)
    cost = Decimal(str(message.usage.model_extra["cost_inr"]))
    assert cost == cost_inr(CLAUDE, 13, 5)
    assert await gateway.balance(org["org_id"]) == 100 - cost
    (sent,) = await upstream_requests(gateway, simulator)
    assert sent["path"] == "/v1/messages" and sent["headers"]["x-api-key"] == PROVIDER_KEY
    assert sent["headers"]["anthropic-version"] == "2023-06-01" and "authorization" not in sent["headers"]
    assert sent["body"] == {"model": CLAUDE_UPSTREAM, "max_tokens": 50, "system": "Be brief.",
                            "metadata": {"user_id": "u-1"}, "messages": ask("one two [sim:tokens=5]")}
    (event,) = await request_events(gateway)
    assert (event.route, event.provider, event.model, event.status, event.stream) == (
        "/v1/messages", "anthropic", CLAUDE, 200, False)
    assert event.charged_inr_nano == cost * 10**9


async def test_stream_on_claude_relays_anthropic_events_and_bills_exactly(sdk, gateway, org, simulator):
    async with sdk.messages.stream(model=CLAUDE, max_tokens=50, tools=[WEATHER], tool_choice={"type": "any"},
                                   messages=ask("hi [sim:tokens=3] [sim:cache_read=2]")) as stream:
        text = "".join([piece async for piece in stream.text_stream])
        final = await stream.get_final_message()
    assert text == completion_text(3)
    assert final.content[1].type == "tool_use" and final.content[1].input == tool_input(WEATHER["input_schema"])
    usage = final.usage
    assert (usage.input_tokens, usage.cache_read_input_tokens) == (7 - 2, 2)
    (event,) = await request_events(gateway)
    prompt, completion = PRICES[CLAUDE]
    cost_usd = 5 * prompt + 2 * Decimal("0.0000001") + usage.output_tokens * completion
    assert (event.route, event.stream, event.prompt_tokens) == ("/v1/messages", True, 7)
    assert event.charged_inr_nano == cost_usd * RATE * 10**9
    assert await gateway.balance(org["org_id"]) == 100 - cost_usd * RATE
    (sent,) = await upstream_requests(gateway, simulator)
    assert sent["body"]["stream"] is True and sent["body"]["model"] == CLAUDE_UPSTREAM


async def test_native_events_arrive_in_order_and_the_closing_delta_carries_the_cost(gateway, org):
    body = {"model": CLAUDE, "max_tokens": 50, "stream": True, "messages": ask("a b [sim:tokens=2]")}
    response = await gateway.client.post("/v1/messages", json=body, headers={"x-api-key": org["api_key"]})
    assert response.headers["Content-Type"].startswith("text/event-stream")
    events = await raw_events(response)
    assert [name for name, _ in events] == [
        "message_start", "ping", "content_block_start", "content_block_delta", "content_block_delta",
        "content_block_stop", "message_delta", "message_stop"]
    assert all(data["type"] == name for name, data in events)
    usage = events[-2][1]["usage"]
    assert (usage["input_tokens"], usage["output_tokens"]) == (7, 2)  # message_start's input merged in
    assert usage["cost_inr"] == cost_inr(CLAUDE, 7, 2)
    assert await gateway.balance(org["org_id"]) == 100 - usage["cost_inr"]


# -- other models: translated ----------------------------------------------------------------------

async def test_create_on_gpt_is_translated_both_ways(sdk, gateway, org, simulator):
    message = await sdk.messages.create(model="gpt-4o-mini", max_tokens=40, system="Be brief.",
                                        stop_sequences=["zebra"], tools=[WEATHER], tool_choice={"type": "auto"},
                                        messages=ask("hello [sim:tokens=4]"))
    assert message.type == "message" and message.role == "assistant" and message.model == "gpt-4o-mini"
    assert [block.type for block in message.content] == ["text"] and message.content[0].text == completion_text(4)
    assert message.stop_reason == "end_turn"
    assert (message.usage.input_tokens, message.usage.output_tokens) == ((2 + 4) + (2 + 4), 4)
    cost = Decimal(str(message.usage.model_extra["cost_inr"]))
    assert cost == cost_inr("gpt-4o-mini", 12, 4)
    assert await gateway.balance(org["org_id"]) == 100 - cost
    (sent,) = await upstream_requests(gateway, simulator)
    assert sent["path"] == "/v1/chat/completions" and sent["headers"]["authorization"] == f"Bearer {PROVIDER_KEY}"
    assert sent["body"] == {
        "model": "gpt-4o-mini", "max_tokens": 40, "stream": False, "stop": ["zebra"], "tool_choice": "auto",
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hello [sim:tokens=4]"}],
        "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
                                                    "parameters": WEATHER["input_schema"]}}]}
    (event,) = await request_events(gateway)
    assert (event.route, event.provider, event.model) == ("/v1/messages", "openai", "gpt-4o-mini")


async def test_stream_on_gpt_is_translated_event_by_event(sdk, gateway, org, simulator):
    async with sdk.messages.stream(model="gpt-4o-mini", max_tokens=40, messages=ask("hi [sim:tokens=3]")) as stream:
        names = []
        async for event in stream:
            names.append(event.type)
        final = await stream.get_final_message()
    assert final.content[0].text == completion_text(3) and final.stop_reason == "end_turn"
    assert (final.usage.input_tokens, final.usage.output_tokens) == (6, 3)
    assert names[0] == "message_start" and names[-1] == "message_stop"
    assert names.count("content_block_start") == 1 and names.count("content_block_stop") == 1
    (event,) = await request_events(gateway)
    assert event.charged_inr_nano == cost_inr("gpt-4o-mini", 6, 3) * 10**9
    (sent,) = await upstream_requests(gateway, simulator)
    assert sent["body"]["stream"] is True and sent["body"]["stream_options"] == {"include_usage": True}


async def test_a_translated_stream_carries_the_cost_on_its_closing_delta(gateway, org):
    body = {"model": "gpt-4o-mini", "max_tokens": 40, "stream": True, "messages": ask("x [sim:tokens=2]")}
    events = await raw_events(await gateway.client.post("/v1/messages", json=body, headers=auth(org["api_key"])))
    assert [name for name, _ in events] == [
        "message_start", "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
        "message_delta", "message_stop"]
    usage = events[-2][1]["usage"]
    assert (usage["input_tokens"], usage["output_tokens"]) == (6, 2)
    assert usage["cost_inr"] == cost_inr("gpt-4o-mini", 6, 2)


# -- keys, credit and errors --------------------------------------------------------------------------

async def test_x_api_key_and_bearer_are_both_accepted(gateway, org):
    by_header = anthropic.AsyncAnthropic(base_url=gateway.url, api_key=None, max_retries=0,
                                         default_headers={"x-api-key": org["api_key"]})
    by_bearer = anthropic.AsyncAnthropic(base_url=gateway.url, auth_token=org["api_key"], max_retries=0)
    for client in (by_header, by_bearer):
        message = await client.messages.create(model=CLAUDE, max_tokens=10, messages=ask("hi [sim:tokens=1]"))
        assert message.content[0].text == completion_text(1)
    wrong = anthropic.AsyncAnthropic(base_url=gateway.url, api_key=None, max_retries=0,
                                     default_headers={"x-api-key": "gwk_wrong"})
    with pytest.raises(anthropic.AuthenticationError):
        await wrong.messages.create(model=CLAUDE, max_tokens=10, messages=ask("hi"))


async def test_no_credit_is_402_without_an_upstream_call(gateway, simulator):
    org = await gateway.new_org("0")
    client = anthropic.AsyncAnthropic(base_url=gateway.url, api_key=org["api_key"], max_retries=0)
    with pytest.raises(anthropic.APIStatusError) as caught:
        await client.messages.create(model=CLAUDE, max_tokens=10, messages=ask("hi"))
    assert caught.value.status_code == 402
    assert await upstream_requests(gateway, simulator) == []


@pytest.mark.parametrize(("model", "directive", "error", "status"), [
    (CLAUDE, "[sim:status=429]", anthropic.RateLimitError, 429),
    (CLAUDE, "[sim:status=529]", anthropic.OverloadedError, 529),
    ("gpt-4o-mini", "[sim:status=503]", anthropic.InternalServerError, 502)])
async def test_upstream_failures_are_gateway_errors_and_not_charged(sdk, gateway, org, model, directive, error, status):
    with pytest.raises(error) as caught:
        await sdk.messages.create(model=model, max_tokens=10, messages=ask(f"x {directive}"))
    assert caught.value.status_code == status
    body = caught.value.body["error"]
    assert body["code"] == "gateway_error" and body["requestedModel"] == model
    (event,) = await request_events(gateway)
    assert (event.route, event.status, event.charged_inr_nano) == ("/v1/messages", status, 0)
    assert await gateway.balance(org["org_id"]) == 100


@pytest.mark.parametrize(("body", "param"), [
    ({"model": CLAUDE, "messages": ask("hi")}, "max_tokens"),
    ({"model": CLAUDE, "max_tokens": 5, "messages": []}, "messages"),
    ({"model": CLAUDE, "max_tokens": 5, "messages": [{"role": "system", "content": "x"}]}, "messages"),
    ({"model": "tune-3-clip-preview", "max_tokens": 5, "messages": ask("hi")}, "model"),
    ({"model": "gpt-4o-mini", "max_tokens": 5, "messages": ask("hi"),
      "tools": [{"type": "web_search_20250305", "name": "web_search"}]}, "tools"),
])
async def test_invalid_requests_are_400_naming_the_field(gateway, org, simulator, body, param):
    response = await gateway.client.post("/v1/messages", json=body, headers=auth(org["api_key"]))
    assert response.status == 400
    assert (await response.json())["error"]["param"] == param
    assert await upstream_requests(gateway, simulator) == []


async def test_an_error_event_mid_stream_reaches_the_client_and_nothing_is_charged(sdk, gateway, org):
    with pytest.raises(anthropic.APIStatusError, match="overloaded_error"):
        async with sdk.messages.stream(model=CLAUDE, max_tokens=50, messages=ask("x [sim:error_after=2]")) as stream:
            await stream.get_final_message()
    (event,) = await request_events(gateway)
    assert (event.status, event.charged_inr_nano) == (529, 0)  # the provider's overload, passed through
    assert await gateway.balance(org["org_id"]) == 100


async def test_the_error_event_carries_the_gateway_error_object(gateway, org):
    body = {"model": CLAUDE, "max_tokens": 50, "stream": True, "messages": ask("x [sim:drop_after=1]")}
    events = await raw_events(await gateway.client.post("/v1/messages", json=body, headers=auth(org["api_key"])))
    name, data = events[-1]
    assert name == "error" and data["type"] == "error"
    assert data["error"]["type"] == "api_error" and data["error"]["code"] == "gateway_error"
    assert data["error"]["usedProvider"] == "anthropic"
    assert "message_stop" not in [name for name, _ in events]


async def test_a_client_that_leaves_mid_stream_is_billed_for_what_it_was_sent(gateway, org, simulator):
    body = {"model": CLAUDE, "max_tokens": 50, "stream": True, "messages": ask("go [sim:hang_after=2]")}
    response = await gateway.client.post("/v1/messages", json=body, headers=auth(org["api_key"]))
    received = b""
    while received.count(b"event: content_block_delta") < 2:
        received += await asyncio.wait_for(response.content.readany(), 5)
    response.close()
    events = await poll(lambda: request_events(gateway))
    (event,) = events
    assert (event.route, event.status, event.completion_tokens) == ("/v1/messages", 499, 2)
    assert event.charged_inr_nano == event.cost_inr_nano > 0
    upstream = await poll(lambda: upstream_requests(gateway, simulator),
                               lambda sent: sent[-1]["outcome"] == "disconnected")
    assert upstream[-1]["outcome"] == "disconnected"


async def test_text_is_retained_for_the_dashboard(gateway, org):
    body = {"model": "gpt-4o-mini", "max_tokens": 10, "system": "sys", "messages": ask("hi [sim:tokens=2]")}
    await gateway.client.post("/v1/messages", json=body, headers=auth(org["api_key"]))
    (event,) = await request_events(gateway)
    (row,) = await gateway.ledger.recorder._fetch("SELECT body FROM content WHERE content_id = ?", (event.content_id,))
    assert orjson.loads(row[0]) == {"request": [{"role": "system", "content": "sys"},
                                                {"role": "user", "content": "hi [sim:tokens=2]"}],
                                    "response": [completion_text(2)]}
