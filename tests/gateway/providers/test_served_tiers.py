"""Served tiers and one-hour cache writes over real sockets: each adapter against the simulator
speaking its provider's wire (the Usage it reads, the tier it forwards), and the gateway's
answers, which tell the client the tier served (OpenAI's shape) and the writes by lifetime
(Anthropic's). A tier an upstream names that is no tier's name is a 502, never billed."""

from collections.abc import AsyncIterator

import aiohttp
import orjson
import pytest

from gateway.providers import Providers, build
from gateway.providers.base import ChatCall
from gateway.providers.http import Upstream
from gateway.providers.usage import Usage
from tests.support import auth, request_events, single_attempt, sse_lines, upstream_requests

WORDS = " ".join(["word"] * 40)  # 40 prompt tokens and more, so the cache directives fit
CACHE = "[sim:cache_read=5] [sim:cache_write=10] [sim:cache_write_1h=20]"


@pytest.fixture
async def providers(config) -> AsyncIterator[Providers]:
    """Every configured adapter, at the simulator, over one real client session."""
    async with aiohttp.ClientSession() as session:
        yield build(config.providers, Upstream(session, lambda *_: None))


def call(model: str, text: str, **extra) -> ChatCall:
    body = {"model": model, "max_tokens": 20, "messages": [{"role": "user", "content": text}], **extra}
    return ChatCall("req_tiers", model, body)


async def streamed_usage(stream) -> Usage:
    usages = [chunk.usage async for chunk in stream if chunk.usage is not None]
    assert len(usages) == 1
    return usages[0]


def prompt(text: str) -> int:
    """The simulator's count of a one-message prompt: its words (markers among them) and 4."""
    return len(text.split()) + 4


# -- each adapter, against its provider's wire -------------------------------------------------------

@pytest.mark.parametrize("provider", ["openai", "azure", "groq"])
async def test_openai_adapters_read_the_tier_served_whole_and_streamed(providers, provider):
    adapter = providers.chat[provider]
    assert (await adapter.chat(call("gpt-4o-mini", "hi", service_tier="flex"))).usage.service_tier == "flex"
    assert (await adapter.chat(call("gpt-4o-mini", "hi"))).usage.service_tier == ""  # "default"
    told = call("gpt-4o-mini", "hi [sim:served_tier=default]", service_tier="priority")
    assert (await adapter.chat(told)).usage.service_tier == ""  # reported, not asked, is billed
    stream = await adapter.open_chat_stream(call("gpt-4o-mini", "hi [sim:tokens=3]", service_tier="priority"))
    assert await streamed_usage(stream) == Usage(prompt("hi [sim:tokens=3]"), 3, service_tier="priority")


async def test_the_responses_adapter_reads_the_tier_served(providers):
    adapter = providers.responses["openai"]
    body = {"model": "gpt-4o-mini", "input": "hi [sim:tokens=2]", "service_tier": "flex"}
    assert (await adapter.respond(ChatCall("r", "gpt-4o-mini", body))).usage.service_tier == "flex"
    stream = await adapter.open_response_stream(ChatCall("r", "gpt-4o-mini", {**body, "service_tier": "scale"}))
    [usage] = [event.usage async for event in stream if event.usage is not None]
    assert usage.service_tier == "scale"


@pytest.mark.parametrize(("provider", "model"), [("anthropic", "claude-haiku-4-5"),
                                                 ("vertex", "claude-haiku-4-5@20251001")])
async def test_claude_adapters_split_the_writes_and_read_the_tier(providers, provider, model):
    text = f"{WORDS} {CACHE} [sim:served_tier=priority] [sim:tokens=2]"
    expected = Usage(prompt(text), 2, 5, 10, 20, "priority")
    adapter = providers.chat[provider]
    assert (await adapter.chat(call(model, text))).usage == expected
    assert await streamed_usage(await adapter.open_chat_stream(call(model, text))) == expected
    standard = await adapter.chat(call(model, "hi [sim:tokens=1]"))
    assert standard.usage.service_tier == "" and standard.body["service_tier"] == "default"


async def test_the_native_messages_calls_split_the_writes_and_read_the_tier(providers):
    adapter = providers.messages["anthropic"]
    text = f"{WORDS} {CACHE} [sim:served_tier=batch] [sim:tokens=2]"
    expected = Usage(prompt(text), 2, 5, 10, 20, "batch")
    assert (await adapter.messages(call("claude-haiku-4-5", text))).usage == expected
    events = [event async for event in await adapter.open_messages_stream(call("claude-haiku-4-5", text))]
    [closing] = [event for event in events if event.usage is not None]
    assert closing.usage == expected


async def test_bedrock_forwards_the_tier_and_reads_the_one_served_and_the_writes_by_ttl(providers, simulator,
                                                                                      gateway):
    adapter, model = providers.chat["bedrock"], "us.anthropic.claude-haiku-4-5-20251001-v1:0"
    text = f"{WORDS} {CACHE} [sim:tokens=2]"
    expected = Usage(prompt(text), 2, 5, 10, 20, "flex")
    assert (await adapter.chat(call(model, text, service_tier="flex"))).usage == expected
    stream = await adapter.open_chat_stream(call(model, text, service_tier="flex"))
    assert await streamed_usage(stream) == expected
    told = call(model, "hi [sim:served_tier=default]", service_tier="priority")
    assert (await adapter.chat(told)).usage.service_tier == ""
    assert (await adapter.chat(call(model, "hi", service_tier="auto"))).usage.service_tier == ""
    sent = [record["body"].get("serviceTier") for record in await upstream_requests(gateway, simulator)]
    assert sent == [{"type": "flex"}, {"type": "flex"}, {"type": "priority"}, None]


# -- the gateway's answers ---------------------------------------------------------------------------

async def test_an_openai_client_sees_the_tier_served_and_upstream_the_tier_asked(gateway, org, simulator):
    body = {"model": "openai/gpt-4o-mini", "messages": [{"role": "user", "content": "hi [sim:tokens=2]"}],
            "service_tier": "flex"}
    answer = await gateway.client.post("/v1/chat/completions", json=body, headers=auth(org["api_key"]))
    assert answer.status == 200 and (await answer.json())["service_tier"] == "flex"
    streamed = await gateway.client.post("/v1/chat/completions", headers=auth(org["api_key"]), json={
        **body, "service_tier": "priority", "stream": True, "stream_options": {"include_usage": True}})
    chunks = [orjson.loads(line) for line in (await sse_lines(streamed))[:-1]]
    assert {chunk.get("service_tier") for chunk in chunks} == {"priority"} and chunks[-1]["usage"]
    sent = [record["body"].get("service_tier") for record in await upstream_requests(gateway, simulator)]
    assert sent == ["flex", "priority"]


async def test_a_translated_chat_answer_names_the_tier_served(gateway, org):
    for model, text in (("anthropic/claude-haiku-4-5", "hi [sim:served_tier=priority]"),
                        ("bedrock/claude-haiku-4-5", "hi [sim:served_tier=priority]")):
        body = {"model": model, "max_tokens": 20, "messages": [{"role": "user", "content": text}]}
        answer = await gateway.client.post("/v1/chat/completions", json=body, headers=auth(org["api_key"]))
        assert answer.status == 200 and (await answer.json())["service_tier"] == "priority", model
        streamed = await gateway.client.post("/v1/chat/completions", headers=auth(org["api_key"]), json={
            **body, "stream": True, "stream_options": {"include_usage": True}})
        chunks = [orjson.loads(line) for line in (await sse_lines(streamed))[:-1]]
        assert chunks[-1]["usage"] and chunks[-1]["service_tier"] == "priority", model


async def test_a_messages_client_sees_the_writes_by_lifetime_and_the_tier(gateway, org):
    body = {"model": "anthropic/claude-haiku-4-5", "max_tokens": 20,
            "messages": [{"role": "user", "content": f"{WORDS} {CACHE} [sim:tokens=2]"}]}
    headers = {**auth(org["api_key"]), "anthropic-version": "2023-06-01"}
    split = {"ephemeral_5m_input_tokens": 10, "ephemeral_1h_input_tokens": 20}
    usage = (await (await gateway.client.post("/v1/messages", json=body, headers=headers)).json())["usage"]
    assert (usage["cache_creation"], usage["cache_creation_input_tokens"], usage["service_tier"]) == (
        split, 30, "standard")
    streamed = await gateway.client.post("/v1/messages", json={**body, "stream": True}, headers=headers)
    [closing] = [data for line in await sse_lines(streamed) if (data := orjson.loads(line))["type"] == "message_delta"]
    assert (closing["usage"]["cache_creation"], closing["usage"]["cache_creation_input_tokens"]) == (split, 30)


async def test_a_bedrock_tier_it_does_not_offer_is_a_400_before_any_call(gateway, org, simulator):
    body = {"model": "bedrock/claude-haiku-4-5", "max_tokens": 20, "service_tier": "scale",
            "messages": [{"role": "user", "content": "hi"}]}
    answer = await gateway.client.post("/v1/chat/completions", json=body, headers=auth(org["api_key"]))
    assert answer.status == 400 and (await answer.json())["error"]["param"] == "service_tier"
    assert await upstream_requests(gateway, simulator) == []


@pytest.fixture
async def one_attempt(make_gateway, config):
    return await make_gateway(single_attempt(config))


@pytest.mark.parametrize("model", ["openai/gpt-4o-mini", "anthropic/claude-haiku-4-5", "bedrock/claude-haiku-4-5"])
async def test_a_served_tier_that_is_no_tiers_name_is_a_recorded_502_never_a_charge(one_attempt, model):
    org = await one_attempt.new_org()
    body = {"model": model, "max_tokens": 20, "messages": [{"role": "user", "content": "hi [sim:served_tier=a b!]"}]}
    answer = await one_attempt.client.post("/v1/chat/completions", json=body, headers=auth(org["api_key"]))
    assert answer.status == 502 and "service tier is 'a b!'" in (await answer.json())["error"]["message"]
    (event,) = await request_events(one_attempt)
    assert (event.status, event.charged_inr_nano) == (502, 0)
