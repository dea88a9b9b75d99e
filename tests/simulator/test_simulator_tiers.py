"""The tier each simulated provider says it served and its one-hour cache writes, read by the
providers' official clients (the openai and anthropic SDKs, botocore): the tier asked for echoed
as each API reports it, `[sim:served_tier=NAME]` reporting another, `[sim:cache_write_1h=N]`
split from the five-minute writes, and a tier the API does not take refused as it refuses it."""

import anthropic
import openai
import pytest
from botocore.exceptions import ClientError

from tests.simulator.test_bedrock_support import SONNET, bedrock, call, sim_url, stream_events, user
from tests.support import sim_records

WORDS_40 = " ".join(["word"] * 40)


def openai_client(simulator) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=str(simulator.make_url("/v1")), api_key="sk-test-key", max_retries=0)


def anthropic_client(simulator) -> anthropic.AsyncAnthropic:
    # Recent SDKs send an api_key as a bearer token; the simulator wants x-api-key, as the gateway sends.
    return anthropic.AsyncAnthropic(base_url=str(simulator.make_url("")), api_key=None, max_retries=0,
                                    default_headers={"x-api-key": "sk-ant-test"})


def said(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


# -- OpenAI: chat completions and Responses ------------------------------------------------------

@pytest.mark.parametrize(("asked", "served"), [
    (None, "default"), ("auto", "default"), ("default", "default"), ("flex", "flex"), ("priority", "priority"),
    ("fast", "priority"), ("scale", "scale")])
async def test_openai_chat_reports_the_tier_asked_for_as_openai_does(simulator, asked, served):
    tier = {} if asked is None else {"service_tier": asked}
    completion = await openai_client(simulator).chat.completions.create(
        model="gpt-sim", messages=said("hi [sim:tokens=2]"), **tier)
    assert completion.service_tier == served


async def test_openai_chat_streams_the_served_tier_on_every_chunk_and_a_directive_overrides_it(simulator):
    stream = await openai_client(simulator).chat.completions.create(
        model="gpt-sim", messages=said("hi [sim:tokens=3] [sim:served_tier=default]"), service_tier="priority",
        stream=True, stream_options={"include_usage": True})
    chunks = [chunk async for chunk in stream]
    assert len(chunks) == 6 and {chunk.service_tier for chunk in chunks} == {"default"}
    assert chunks[-1].usage is not None and not chunks[-1].choices


async def test_openai_refuses_a_tier_it_does_not_offer(simulator):
    with pytest.raises(openai.BadRequestError):
        await openai_client(simulator).chat.completions.create(model="gpt-sim", messages=said("hi"),
                                                               service_tier="turbo")  # type: ignore[arg-type]


async def test_a_response_reports_its_served_tier_once_done(simulator):
    client = openai_client(simulator)
    response = await client.responses.create(model="gpt-4o-mini", input="hi [sim:tokens=2]", service_tier="flex")
    assert response.service_tier == "flex"
    async with client.responses.stream(model="gpt-4o-mini", input="hi [sim:served_tier=priority]",
                                       service_tier="auto") as stream:
        events = [event async for event in stream]
    assert events[0].response.service_tier == "auto"  # response.created repeats the request
    assert events[-1].type == "response.completed" and events[-1].response.service_tier == "priority"


# -- Anthropic (and Claude on Vertex, the same code) ---------------------------------------------

async def test_anthropic_reports_one_hour_writes_apart_in_cache_creation(simulator):
    text = f"{WORDS_40} [sim:cache_read=5] [sim:cache_write=10] [sim:cache_write_1h=20] [sim:tokens=2]"
    message = await anthropic_client(simulator).messages.create(model="claude-sim", max_tokens=20, messages=said(text))
    usage = message.usage
    assert usage.cache_creation is not None
    assert (usage.cache_creation.ephemeral_5m_input_tokens, usage.cache_creation.ephemeral_1h_input_tokens) == (10, 20)
    assert usage.cache_creation_input_tokens == 30 and usage.cache_read_input_tokens == 5
    assert usage.input_tokens == (40 + 4 + 4) - 35 and usage.service_tier == "standard"  # each marker a word


async def test_anthropic_streams_the_split_and_the_tier_in_message_start(simulator):
    async with anthropic_client(simulator).messages.stream(
            model="claude-sim", max_tokens=20, service_tier="auto",
            messages=said("a b c d [sim:cache_write_1h=3] [sim:served_tier=priority]")) as stream:
        final = await stream.get_final_message()
    assert final.usage.cache_creation is not None and final.usage.cache_creation.ephemeral_1h_input_tokens == 3
    assert final.usage.cache_creation.ephemeral_5m_input_tokens == 0
    assert final.usage.cache_creation_input_tokens == 3 and final.usage.service_tier == "priority"


async def test_anthropic_writes_no_more_to_the_cache_than_the_prompt_holds(simulator):
    message = await anthropic_client(simulator).messages.create(
        model="claude-sim", max_tokens=5, messages=said("a [sim:cache_write=2] [sim:cache_write_1h=1000]"))
    prompt = 3 + 4
    assert message.usage.cache_creation is not None
    assert message.usage.cache_creation.ephemeral_1h_input_tokens == prompt - 2 and message.usage.input_tokens == 0


async def test_anthropic_refuses_a_service_tier_it_does_not_take(simulator):
    with pytest.raises(anthropic.BadRequestError):
        await anthropic_client(simulator).messages.create(model="claude-sim", max_tokens=5, messages=said("hi"),
                                                          service_tier="priority")  # type: ignore[arg-type]


# -- Bedrock Converse and ConverseStream ---------------------------------------------------------

async def test_converse_echoes_the_tier_and_details_writes_by_ttl(make_client):
    client = await make_client()
    text = f"{WORDS_40} [sim:cache_write=10] [sim:cache_write_1h=6] [sim:tokens=2]"
    answer = await call(bedrock(sim_url(client)).converse, modelId=SONNET, messages=user(text),
                        serviceTier={"type": "flex"})
    assert answer["serviceTier"] == {"type": "flex"}
    prompt = 40 + 3 + 4
    assert answer["usage"] == {"inputTokens": prompt - 16, "outputTokens": 2, "totalTokens": prompt + 2,
                               "cacheReadInputTokens": 0, "cacheWriteInputTokens": 16,
                               "cacheDetails": [{"ttl": "1h", "inputTokens": 6}, {"ttl": "5m", "inputTokens": 10}]}
    [record] = await sim_records(client)
    assert record["body"]["serviceTier"] == {"type": "flex"}


async def test_converse_names_no_tier_unless_asked_or_told(make_client):
    client = await make_client()
    converse = bedrock(sim_url(client)).converse
    assert "serviceTier" not in await call(converse, modelId=SONNET, messages=user("hi [sim:tokens=1]"))
    told = await call(converse, modelId=SONNET, messages=user("hi [sim:served_tier=default]"),
                      serviceTier={"type": "priority"})
    assert told["serviceTier"] == {"type": "default"}


async def test_converse_stream_names_the_tier_in_its_metadata(make_client):
    client = await make_client()
    events = await stream_events(bedrock(sim_url(client)), modelId=SONNET, serviceTier={"type": "priority"},
                                 messages=user("a b c [sim:cache_write_1h=2] [sim:tokens=1]"))
    metadata = events[-1]["metadata"]
    assert metadata["serviceTier"] == {"type": "priority"}
    assert metadata["usage"]["cacheWriteInputTokens"] == 2
    assert metadata["usage"]["cacheDetails"] == [{"ttl": "1h", "inputTokens": 2}]


async def test_converse_refuses_a_tier_aws_does_not_offer(make_client):
    client = await make_client()
    with pytest.raises(ClientError) as caught:
        # botocore checks nothing of a string enum: the service does.
        await call(bedrock(sim_url(client)).converse, modelId=SONNET, messages=user("hi"),
                   serviceTier={"type": "scale"})
    assert caught.value.response["Error"]["Code"] == "ValidationException"
