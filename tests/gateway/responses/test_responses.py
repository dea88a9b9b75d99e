"""POST /v1/responses and GET /v1/responses/{id} through the gateway, with the openai SDK and raw
HTTP: OpenAI models natively (the provider's own /v1/responses), Claude and Gemini through chat."""

import asyncio
import json
import time
from decimal import Decimal

import pytest

from tests.support import auth, poll, request_events, upstream_requests

openai = pytest.importorskip("openai")

MODELS = ["claude-haiku-4-5", "gemini-2.5-flash", "gpt-4o-mini"]
WEATHER = {"type": "function", "name": "get_weather", "description": "The weather in a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}


@pytest.fixture
def client(gateway, org):
    return openai.AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=org["api_key"], max_retries=0)


async def charged(gateway) -> list:
    return [e for e in await request_events(gateway) if e.route == "/v1/responses"]


@pytest.mark.parametrize("model", MODELS)
async def test_a_response_is_answered_billed_once_and_carries_its_cost(gateway, client, model):
    response = await client.responses.create(model=model, input="say hello", instructions="be brief")
    assert response.status == "completed" and response.output_text
    assert response.id.startswith("resp_") and response.model == model
    usage = response.usage
    assert usage.input_tokens > 0 and usage.output_tokens > 0
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens
    [event] = await charged(gateway)
    assert (event.status, event.prompt_tokens, event.completion_tokens) == (200, usage.input_tokens,
                                                                           usage.output_tokens)
    extra = response.model_extra["usage"] if response.model_extra.get("usage") else usage.model_extra
    assert Decimal(str(extra["cost_inr"])) > 0


@pytest.mark.parametrize("model", MODELS)
async def test_a_streamed_response_sends_the_event_sequence_and_bills_once(gateway, client, model):
    stream = await client.responses.create(model=model, input="count to five", stream=True)
    events = [event async for event in stream]
    kinds = [event.type for event in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert "response.output_text.delta" in kinds and kinds[-1] == "response.completed"
    assert [event.sequence_number for event in events] == list(range(len(events)))
    text = "".join(event.delta for event in events if event.type == "response.output_text.delta")
    final = events[-1].response
    assert final.output_text == text and final.usage.output_tokens > 0
    [event] = await charged(gateway)
    assert (event.status, event.completion_tokens) == (200, final.usage.output_tokens)


async def test_the_sdk_stream_helper_accumulates_the_final_response(client):
    async with client.responses.stream(model="claude-haiku-4-5", input="hello") as stream:
        final = await stream.get_final_response()
    assert final.status == "completed" and final.output_text


@pytest.mark.parametrize("model", MODELS)
async def test_a_function_call_round_trip(gateway, client, model):
    first = await client.responses.create(model=model, input="weather in Paris? [sim:tool=get_weather]",
                                          tools=[WEATHER])
    [call] = [item for item in first.output if item.type == "function_call"]
    assert call.name == "get_weather" and json.loads(call.arguments) is not None
    second = await client.responses.create(
        model=model, tools=[WEATHER],
        input=[{"role": "user", "content": "weather in Paris?"}, call.model_dump(exclude_none=True),
               {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}])
    assert second.status == "completed" and second.output_text
    assert len(await charged(gateway)) == 2


async def test_a_streamed_function_call_sends_its_argument_deltas(client):
    stream = await client.responses.create(model="claude-haiku-4-5", input="weather? [sim:tool=get_weather]",
                                           tools=[WEATHER], stream=True)
    events = [event async for event in stream]
    deltas = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    [call] = [item for item in events[-1].response.output if item.type == "function_call"]
    assert deltas == call.arguments and json.loads(deltas)["city"]


async def test_previous_response_id_continues_the_stored_conversation(gateway, client, simulator):
    first = await client.responses.create(model="claude-haiku-4-5", input="my name is Ada")
    fetched = await client.responses.retrieve(first.id)
    assert fetched.id == first.id and fetched.output_text == first.output_text
    second = await client.responses.create(model="gemini-2.5-flash", input="what is my name?",
                                           previous_response_id=first.id)
    assert second.previous_response_id == first.id
    third = await client.responses.create(model="claude-haiku-4-5", input="and again?",
                                          previous_response_id=second.id)
    last_upstream = json.dumps((await upstream_requests(gateway, simulator))[-1])
    for said in ("my name is Ada", first.output_text, "what is my name?", second.output_text, "and again?"):
        assert said in last_upstream  # the whole conversation went upstream
    assert third.status == "completed"


async def test_another_orgs_response_is_404_and_an_unknown_one_too(gateway, client):
    mine = await client.responses.create(model="claude-haiku-4-5", input="hello")
    other = await gateway.new_org("10")
    response = await gateway.client.get(f"/v1/responses/{mine.id}", headers=auth(other["api_key"]))
    assert response.status == 404 and "does not exist" in (await response.json())["error"]["message"]
    for unknown in ("resp_nothing", "not-a-response"):
        assert (await gateway.client.get(f"/v1/responses/{unknown}", headers=auth(other["api_key"]))).status == 404
    body = {"model": "claude-haiku-4-5", "input": "hi", "previous_response_id": mine.id}
    refused = await gateway.client.post("/v1/responses", json=body, headers=auth(other["api_key"]))
    assert refused.status == 400 and (await refused.json())["error"]["param"] == "previous_response_id"


async def test_an_org_that_keeps_no_text_is_told_why_nothing_was_stored(gateway):
    org = await gateway.new_org("10", retention="none")
    key = auth(org["api_key"])
    made = await (await gateway.client.post("/v1/responses", json={"model": "gpt-4o-mini", "input": "hi"},
                                            headers=key)).json()
    response = await gateway.client.get(f"/v1/responses/{made['id']}", headers=key)
    assert response.status == 404 and "retention is none" in (await response.json())["error"]["message"]
    body = {"model": "gpt-4o-mini", "input": "more", "previous_response_id": made["id"]}
    refused = await gateway.client.post("/v1/responses", json=body, headers=key)
    assert refused.status == 400 and "retention is none" in (await refused.json())["error"]["message"]


async def test_store_false_is_not_retrievable(gateway, client):
    made = await client.responses.create(model="gpt-4o-mini", input="hi", store=False)
    with pytest.raises(openai.NotFoundError, match="store=false"):
        await client.responses.retrieve(made.id)


@pytest.mark.parametrize(("body", "param"), [
    ({"model": "gpt-4o-mini"}, "input"),
    ({"model": "gpt-4o-mini", "input": 5}, "input"),
    ({"model": "gpt-4o-mini", "input": "hi", "background": True}, "background"),
    ({"model": "claude-haiku-4-5", "input": "hi", "tools": [{"type": "web_search"}]}, "tools[0].type"),
    ({"model": "gpt-4o-mini", "input": "hi", "max_output_tokens": 0}, "max_output_tokens"),
    ({"model": "gemini-2.5-flash", "input": [{"type": "mystery"}]}, "input[0].type"),
    ({"model": "no-such-model", "input": "hi"}, "model"),
])
async def test_what_cannot_be_honoured_is_a_400_naming_the_field(gateway, org, body, param):
    response = await gateway.client.post("/v1/responses", json=body, headers=auth(org["api_key"]))
    assert response.status == 400, await response.text()
    assert (await response.json())["error"]["param"] == param
    assert not await charged(gateway)


async def test_upstream_failures_are_not_charged(gateway, client):
    with pytest.raises(openai.RateLimitError):
        await client.responses.create(model="claude-haiku-4-5", input="hi [sim:status=429]")
    with pytest.raises(openai.InternalServerError):
        await client.responses.create(model="gpt-4o-mini", input="hi [sim:status=503]")
    events = await charged(gateway)
    assert [(e.status, e.charged_inr_nano) for e in events] == [(429, 0), (502, 0)]


async def test_without_credit_it_is_402(gateway):
    org = await gateway.new_org("0")
    response = await gateway.client.post("/v1/responses", json={"model": "gpt-4o-mini", "input": "hi"},
                                         headers=auth(org["api_key"]))
    assert response.status == 402


async def test_a_client_leaving_mid_stream_is_billed_499_for_what_it_was_sent(gateway, org):
    body = {"model": "gemini-2.5-flash", "input": "go [sim:hang_after=3]", "stream": True}
    response = await gateway.client.post("/v1/responses", json=body, headers=auth(org["api_key"]))
    received = b""
    while received.count(b"response.output_text.delta\ndata") < 3:
        received += await asyncio.wait_for(response.content.readany(), 5)
    response.close()
    [event] = await poll(lambda: charged(gateway))
    assert (event.status, event.completion_tokens) == (499, 3)
    assert event.charged_inr_nano == event.cost_inr_nano > 0


async def test_a_provider_failing_mid_stream_ends_with_an_error_event_not_charged(gateway, org):
    body = {"model": "claude-haiku-4-5", "input": "go [sim:drop_after=2]", "stream": True}
    response = await gateway.client.post("/v1/responses", json=body, headers=auth(org["api_key"]))
    frames = (await response.read()).decode().strip().split("\n\n")
    name, data = frames[-1].split("\n")
    error = json.loads(data.removeprefix("data: "))
    assert name == "event: error" and error["type"] == "error" and error["code"] == "gateway_error"
    assert error["sequence_number"] == len(frames) - 1  # numbered on from the events before it
    [event] = await charged(gateway)
    assert event.status == 502 and event.charged_inr_nano == 0


async def test_an_openai_model_goes_to_the_providers_own_responses_api(gateway, client, simulator):
    first = await client.responses.create(model="gpt-4o-mini", input="my name is Ada", instructions="be brief",
                                          metadata={"ticket": "7"})
    sent = (await upstream_requests(gateway, simulator))[-1]
    assert sent["path"] == "/v1/responses" and sent["body"]["instructions"] == "be brief"
    assert sent["body"]["metadata"] == {"ticket": "7"} and sent["body"]["input"] == "my name is Ada"
    second = await client.responses.create(model="gpt-4o-mini", input="who am I?", previous_response_id=first.id)
    sent = (await upstream_requests(gateway, simulator))[-1]
    assert "previous_response_id" not in sent["body"]  # the provider never saw the gateway's ids
    said = json.dumps(sent["body"]["input"])
    assert "my name is Ada" in said and first.output_text in said and "who am I?" in said
    assert second.id.startswith("resp_") and second.id != first.id
    assert (await client.responses.retrieve(second.id)).output_text == second.output_text


async def test_a_native_stream_carries_the_gateways_id_and_the_cost_at_its_end(gateway, org):
    body = {"model": "gpt-4o-mini", "input": "hello", "stream": True}
    response = await gateway.client.post("/v1/responses", json=body, headers=auth(org["api_key"]))
    events = [json.loads(frame.split("\ndata: ", 1)[1]) for frame in (await response.text()).strip().split("\n\n")]
    ids = {event["response"]["id"] for event in events if "response" in event}
    assert len(ids) == 1 and ids.pop().startswith("resp_0")  # the gateway's, not the simulator's resp_sim
    assert [event["sequence_number"] for event in events] == list(range(len(events)))
    final = events[-1]["response"]
    [event] = await charged(gateway)
    assert final["usage"]["output_tokens"] == event.completion_tokens == 16
    assert Decimal(str(final["usage"]["cost_inr"])) * 10**9 == event.charged_inr_nano > 0


async def test_a_native_stream_cut_by_the_provider_ends_with_an_error_event(gateway, org):
    body = {"model": "gpt-4o-mini", "input": "go [sim:drop_after=2]", "stream": True}
    response = await gateway.client.post("/v1/responses", json=body, headers=auth(org["api_key"]))
    frames = (await response.text()).strip().split("\n\n")
    assert frames[-1].startswith("event: error\n")
    [event] = await charged(gateway)
    assert (event.status, event.charged_inr_nano) == (502, 0)


async def test_a_response_whose_text_retention_removed_is_410_saying_so(gateway, client, org):
    made = await client.responses.create(model="gpt-4o-mini", input="hi")
    now_us = time.time_ns() // 1000
    assert await gateway.ledger.recorder.remove_text(now_us + 1, now_us) == 1
    response = await gateway.client.get(f"/v1/responses/{made.id}", headers=auth(org["api_key"]))
    assert response.status == 410 and "retention removed" in (await response.json())["error"]["message"]
    body = {"model": "gpt-4o-mini", "input": "more", "previous_response_id": made.id}
    refused = await gateway.client.post("/v1/responses", json=body, headers=auth(org["api_key"]))
    assert refused.status == 400 and "retention removed" in (await refused.json())["error"]["message"]
