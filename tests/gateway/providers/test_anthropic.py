"""The anthropic adapter behind POST /v1/chat/completions: each translation checked against the
exact request the simulator received, streams chunk by chunk, max_tokens enforcement, cache-token
billing and upstream failures."""

import asyncio
from decimal import Decimal

import msgspec
import orjson
import pytest

from gateway.accounts import admin
from gateway.accounts.sealing import Sealer
from simulator.anthropic_messages import json_fragments, tool_input
from simulator.textgen import completion_text
from tests.support import (
    PROVIDER_KEY, decimal_json, poll, post_chat, request_events, single_attempt, sse_lines, upstream_requests,
)

MODEL, UPSTREAM_MODEL = "claude-haiku-4-5", "claude-haiku-4-5-20251001"
PROMPT, CACHE_READ, COMPLETION = Decimal("0.000001"), Decimal("0.0000001"), Decimal("0.000005")
CACHE_WRITE = Decimal("0.00000125")  # claude-haiku-4-5 input_cache_write
RATE = Decimal("84.0")
PNG = "iVBORw0KGgo="
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather", "parameters": SCHEMA}}


def claude(text: str = "hello there", **extra) -> dict:
    return {"model": MODEL, "max_tokens": 100, "messages": [{"role": "user", "content": text}], **extra}


async def chunks_of(response) -> list[dict]:
    events = await sse_lines(response)
    assert events[-1] == b"[DONE]"
    return [orjson.loads(event) for event in events[:-1]]


# -- the request, as Anthropic receives it ------------------------------------------------------

async def test_the_upstream_request_is_the_translated_anthropic_request(gateway, org, simulator):
    body = {"model": MODEL, "max_completion_tokens": 80, "temperature": 0.2, "top_p": 0.5, "stop": ["zebra"],
            "user": "end-user-7", "tools": [WEATHER],
            "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Weather?"},
                {"role": "user", "content": [
                    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}]},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "toolu_1", "type": "function",
                     "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'}}]},
                {"role": "tool", "tool_call_id": "toolu_1", "content": "2 C"},
                {"role": "user", "content": "And tomorrow?"}]}
    response = await post_chat(gateway, org, body)
    assert response.status == 200, await response.text()
    (sent,) = await upstream_requests(gateway, simulator)
    assert (sent["method"], sent["path"]) == ("POST", "/v1/messages")
    assert sent["headers"]["x-api-key"] == PROVIDER_KEY and sent["headers"]["anthropic-version"] == "2023-06-01"
    assert "authorization" not in sent["headers"]
    assert sent["body"] == {
        "model": UPSTREAM_MODEL, "max_tokens": 80, "system": "Be brief.",
        "messages": [
            {"role": "user", "content": [
                {"type": "text", "text": "Weather?"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "2 C"},
                {"type": "text", "text": "And tomorrow?"}]}],
        "temperature": 0.2, "top_p": 0.5, "stop_sequences": ["zebra"],
        "tools": [{"name": "get_weather", "description": "Weather", "input_schema": SCHEMA}],
        "tool_choice": {"type": "tool", "name": "get_weather"}, "metadata": {"user_id": "end-user-7"}}


async def test_a_stream_asks_upstream_for_a_stream_without_openai_fields(gateway, org, simulator):
    response = await post_chat(gateway, org, claude("hi", stream=True, stream_options={"include_usage": True}))
    await response.read()
    (sent,) = await upstream_requests(gateway, simulator)
    assert sent["body"] == {"model": UPSTREAM_MODEL, "max_tokens": 100, "stream": True,
                            "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize("stream", [False, True])
async def test_missing_max_tokens_is_400_before_any_upstream_call(gateway, org, simulator, stream):
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "stream": stream}
    response = await post_chat(gateway, org, body)
    assert response.status == 400
    error = (await response.json())["error"]
    assert error["param"] == "max_tokens" and "max_tokens" in error["message"]
    assert await upstream_requests(gateway, simulator) == []
    assert await request_events(gateway) == []


async def test_max_tokens_is_optional_for_other_providers(gateway, org):
    response = await post_chat(gateway, org, {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]})
    assert response.status == 200


async def test_an_image_url_that_is_not_a_data_url_is_400_without_upstream_call(gateway, org, simulator):
    image = {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}
    response = await post_chat(gateway, org, claude([{"type": "text", "text": "what?"}, image]))
    assert response.status == 400
    error = (await response.json())["error"]
    assert error["param"] == "messages" and "messages[0]" in error["message"] and "data URL" in error["message"]
    assert await upstream_requests(gateway, simulator) == []


async def test_the_orgs_own_anthropic_key_is_sent_as_x_api_key(make_gateway, config, simulator):
    gateway = await make_gateway(msgspec.structs.replace(
        config, secrets=msgspec.structs.replace(config.secrets, master_key="test-master-key-0123456789")))
    org = await gateway.new_org("100")
    await admin.set_provider_key(gateway.ledger.recorder, Sealer("test-master-key-0123456789"), org["org_id"],
                                 "anthropic", "sk-ant-org-own-key-0123456789")
    await gateway.ledger.follower.catch_up()
    assert (await post_chat(gateway, org, claude())).status == 200
    (sent,) = await upstream_requests(gateway, simulator)
    assert sent["headers"]["x-api-key"] == "sk-ant-org-own-key-0123456789"
    (event,) = await request_events(gateway)
    assert event.cost_inr_nano > 0 and event.charged_inr_nano == 0


# -- the answer, as the client receives it ------------------------------------------------------

async def test_a_json_answer_is_an_openai_completion_billed_exactly(gateway, org):
    response = await post_chat(gateway, org, claude("one two three [sim:tokens=5]"))
    body = decimal_json(await response.read())
    assert body["object"] == "chat.completion" and body["id"].startswith("msg_")
    assert body["model"] == UPSTREAM_MODEL
    assert body["choices"] == [{"index": 0, "logprobs": None, "finish_reason": "stop",
                                "message": {"role": "assistant", "content": completion_text(5)}}]
    usage = body["usage"]
    assert (usage["prompt_tokens"], usage["completion_tokens"], usage["total_tokens"]) == (8, 5, 13)
    assert usage["cost_usd_input"] == 8 * PROMPT and usage["cost_usd_output"] == 5 * COMPLETION
    assert usage["cost_inr"] == (8 * PROMPT + 5 * COMPLETION) * RATE
    assert await gateway.balance(org["org_id"]) == 100 - usage["cost_inr"]
    (event,) = await request_events(gateway)
    assert (event.route, event.provider, event.model, event.status) == ("/v1/chat/completions", "anthropic", MODEL, 200)


async def test_cache_reads_and_writes_are_billed_at_their_cache_prices(gateway, org):
    text = "w " * 20 + "[sim:cache_read=16] [sim:cache_write=2] [sim:tokens=3]"
    body = decimal_json(await (await post_chat(gateway, org, claude(text))).read())
    usage = body["usage"]
    prompt_tokens = 23 + 4  # words + per-message overhead: 9 uncached + 2 written + 16 read
    assert usage["prompt_tokens"] == prompt_tokens and usage["prompt_tokens_details"] == {"cached_tokens": 16}
    cost_in = (prompt_tokens - 16 - 2) * PROMPT + 16 * CACHE_READ + 2 * CACHE_WRITE
    assert usage["cost_usd_input"] == cost_in
    assert usage["cost_inr"] == (cost_in + 3 * COMPLETION) * RATE
    assert await gateway.balance(org["org_id"]) == 100 - usage["cost_inr"]


async def test_a_tool_call_answer(gateway, org):
    request = claude("[sim:tool=get_weather] [sim:tokens=2]", tools=[WEATHER])
    body = await (await post_chat(gateway, org, request)).json()
    (choice,) = body["choices"]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] == completion_text(2)
    (call,) = choice["message"]["tool_calls"]
    assert call["id"].startswith("toolu_") and call["type"] == "function"
    assert call["function"]["name"] == "get_weather"
    assert orjson.loads(call["function"]["arguments"]) == tool_input(SCHEMA)
    assert body["usage"]["completion_tokens"] == 2 + len(json_fragments(tool_input(SCHEMA)))


@pytest.mark.parametrize(("extra", "finish_reason"), [
    ({"max_tokens": 3}, "length"), ({"stop": "fox"}, "stop"),
    ({"messages": [{"role": "user", "content": "[sim:refusal]"}]}, "content_filter")])
async def test_stop_reasons_become_finish_reasons(gateway, org, extra, finish_reason):
    body = await (await post_chat(gateway, org, {**claude("x"), **extra})).json()
    assert body["choices"][0]["finish_reason"] == finish_reason


# -- streams --------------------------------------------------------------------------------------

async def test_a_stream_is_translated_chunk_by_chunk_with_tool_call_fragments(gateway, org):
    body = claude("[sim:tokens=2]", stream=True, tools=[WEATHER], tool_choice="required",
                  stream_options={"include_usage": True})
    chunks = await chunks_of(await post_chat(gateway, org, body))
    message_id = chunks[0]["id"]
    assert message_id.startswith("msg_") and all(c["id"] == message_id for c in chunks)
    deltas = [(c["choices"][0]["delta"], c["choices"][0]["finish_reason"]) for c in chunks[:-1]]
    tool_id = deltas[3][0]["tool_calls"][0]["id"]
    fragments = json_fragments(tool_input(SCHEMA))
    assert deltas == [
        ({"role": "assistant", "content": ""}, None),
        ({"content": "the "}, None),
        ({"content": "quick "}, None),
        ({"tool_calls": [{"index": 0, "id": tool_id, "type": "function",
                          "function": {"name": "get_weather", "arguments": ""}}]}, None),
        *[({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}, None) for piece in fragments],
        ({}, "tool_calls"),
    ]
    usage = decimal_json(orjson.dumps(chunks[-1]))["usage"]
    assert chunks[-1]["choices"] == [] and usage["completion_tokens"] == 2 + len(fragments)
    assert usage["cost_inr"] == (usage["prompt_tokens"] * PROMPT + usage["completion_tokens"] * COMPLETION) * RATE
    assert await gateway.balance(org["org_id"]) == 100 - usage["cost_inr"]


async def test_a_stream_is_billed_on_anthropic_usage_with_cache_reads(gateway, org):
    response = await post_chat(gateway, org, claude("a b c d [sim:cache_read=5] [sim:tokens=4]", stream=True))
    chunks = await chunks_of(response)
    assert all(c["choices"] for c in chunks)  # no usage chunk unless asked for
    (event,) = await request_events(gateway)
    assert (event.status, event.prompt_tokens, event.completion_tokens) == (200, 10, 4)
    cost_usd = (10 - 5) * PROMPT + 5 * CACHE_READ + 4 * COMPLETION
    assert event.cost_usd_nano == cost_usd * 10**9 and event.charged_inr_nano == cost_usd * RATE * 10**9


async def test_a_client_that_leaves_mid_stream_is_billed_for_what_it_was_sent(gateway, org, simulator):
    response = await post_chat(gateway, org, claude("go [sim:hang_after=2]", stream=True))
    received = b""
    while received.count(b"data: ") < 3:
        received += await asyncio.wait_for(response.content.readany(), 5)
    response.close()
    events = await poll(lambda: request_events(gateway))
    (event,) = events
    assert (event.status, event.completion_tokens) == (499, 2) and event.charged_inr_nano > 0
    upstream = await poll(lambda: upstream_requests(gateway, simulator),
                               lambda sent: sent[-1]["outcome"] == "disconnected")
    assert upstream[-1]["outcome"] == "disconnected"  # the upstream request was abandoned at once


# -- upstream failures ------------------------------------------------------------------------------

@pytest.mark.parametrize(("directive", "status"), [
    ("[sim:status=429]", 429), ("[sim:status=529]", 529), ("[sim:status=500]", 502), ("[sim:drop_after=0]", 502),
    ("[sim:error_after=1]", 529)])
async def test_upstream_failures_become_gateway_errors_and_are_not_charged(make_gateway, config, directive, status):
    gateway = await make_gateway(single_attempt(config))  # Vertex and Bedrock serve the model too
    org = await gateway.new_org("100")
    response = await post_chat(gateway, org, claude(f"x {directive}"))
    assert response.status == status
    error = (await response.json())["error"]
    assert error["type"] == error["code"] == "gateway_error"
    assert (error["usedProvider"], error["requestedModel"]) == ("anthropic", MODEL)
    assert PROVIDER_KEY not in error["message"]
    if status == 429:
        assert response.headers["Retry-After"] == "1" and "429" in error["message"]
    assert await gateway.balance(org["org_id"]) == 100
    (event,) = await request_events(gateway)
    assert event.status == status and event.charged_inr_nano == 0


async def test_an_upstream_400_stays_400(gateway, org):
    response = await post_chat(gateway, org, claude("x", temperature=1.5))  # Anthropic allows at most 1
    assert response.status == 400
    assert "temperature" in (await response.json())["error"]["message"]


async def test_an_error_event_mid_stream_ends_the_stream_with_an_error_and_no_charge(gateway, org):
    chunks = await chunks_of(await post_chat(gateway, org, claude("x [sim:error_after=2]", stream=True)))
    assert [c["choices"][0]["delta"].get("content") for c in chunks[1:3]] == ["the ", "quick "]
    error = chunks[-1]["error"]
    assert error["type"] == "gateway_error" and "overloaded_error" in error["message"]
    (event,) = await request_events(gateway)
    assert event.status == 529 and event.charged_inr_nano == 0  # the provider's overload, passed through
    assert await gateway.balance(org["org_id"]) == 100


async def test_a_stream_dropped_by_upstream_ends_with_an_error_and_no_charge(gateway, org):
    chunks = await chunks_of(await post_chat(gateway, org, claude("x [sim:drop_after=1]", stream=True)))
    assert chunks[-1]["error"]["type"] == "gateway_error"
    (event,) = await request_events(gateway)
    assert event.status == 502 and event.charged_inr_nano == 0


# -- the official openai SDK --------------------------------------------------------------------------

async def test_the_openai_sdk_drives_claude_json_and_streamed(gateway, org):
    openai = pytest.importorskip("openai")
    client = openai.AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=org["api_key"], max_retries=0)
    reply = await client.chat.completions.create(model=MODEL, max_tokens=50,
                                                 messages=[{"role": "user", "content": "hi [sim:tokens=6]"}])
    assert reply.choices[0].message.content == completion_text(6) and reply.usage.completion_tokens == 6
    stream = await client.chat.completions.create(
        model=f"anthropic/{MODEL}", max_tokens=50, tools=[WEATHER], stream=True, stream_options={"include_usage": True},
        messages=[{"role": "user", "content": "hi [sim:tokens=3] [sim:tool=get_weather]"}])
    chunks = [chunk async for chunk in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    arguments = "".join(call.function.arguments or "" for c in chunks if c.choices
                        for call in c.choices[0].delta.tool_calls or ())
    assert text == completion_text(3) and orjson.loads(arguments) == tool_input(SCHEMA)
    costs = [reply.usage.model_extra["cost_inr"], chunks[-1].usage.model_extra["cost_inr"]]
    assert await gateway.balance(org["org_id"]) == 100 - sum(Decimal(str(c)) for c in costs)
    with pytest.raises(openai.BadRequestError, match="max_tokens"):
        await client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])
