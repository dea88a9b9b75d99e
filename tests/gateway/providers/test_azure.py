"""Azure OpenAI through the gateway, driven by the official SDKs: chat (JSON and streamed, the
stream's usage billed though the client did not ask for it), Responses, embeddings, speech and
transcription, on the v1 API and the deployments path. The simulator's record shows what Azure
received (path, api-key, api-version, deployment); the ledger shows each charge is the
simulator's tokens at the azure entry's prices, exactly."""

import io
from decimal import Decimal

import pytest

from simulator.cloud_credentials import AZURE_API_KEY
from simulator.mp3 import silent_mp3
from tests.gateway.providers.azure_support import API_VERSION, DEPLOYMENTS, RATE, azure_provider, \
    chat_cost_inr_nano, price, with_azure
from tests.support import auth, request_events

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")


@pytest.fixture(params=["v1", "deployments"])
def api_version(request) -> str:
    return API_VERSION if request.param == "deployments" else ""


@pytest.fixture
async def gateway(make_gateway, config, sim_url, tmp_path, api_version):
    return await make_gateway(with_azure(config, azure_provider(sim_url, api_version=api_version), tmp_path))


@pytest.fixture
def client(gateway, org):
    return openai.AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=org["api_key"], max_retries=0)


def where(api_version: str, operation: str, deployment: str) -> str:
    """The path Azure must have been sent `operation` for `deployment` on."""
    if not api_version:
        return f"/openai/v1{operation}"
    return "/openai/responses" if operation == "/responses" else f"/openai/deployments/{deployment}{operation}"


def assert_sent_to_azure(record: dict, api_version: str, operation: str, deployment: str) -> None:
    assert record["path"] == where(api_version, operation, deployment)
    assert record["headers"]["api-key"] == AZURE_API_KEY and "authorization" not in record["headers"]
    assert record["query"].get("api-version", "") == api_version


async def test_chat_json_and_stream_are_billed_at_the_deployments_price(client, gateway, simulator, api_version):
    text = "hello [sim:tokens=5] [sim:cache_read=4]"
    reply = await client.chat.completions.create(model="my-gpt", messages=[{"role": "user", "content": text}])
    assert reply.choices[0].message.content and reply.usage.completion_tokens == 5
    cached = reply.usage.prompt_tokens_details.cached_tokens
    assert cached == 4
    stream = await client.chat.completions.create(model="my-gpt", stream=True,
                                                  messages=[{"role": "user", "content": "hi [sim:tokens=3]"}])
    chunks = [chunk async for chunk in stream]  # no include_usage: the client sees no usage chunk
    assert all(chunk.id and chunk.choices for chunk in chunks)  # Azure's prompt-filter opener is not relayed
    assert "".join(c.choices[0].delta.content or "" for c in chunks) and chunks[-1].usage is None
    json_event, stream_event = await request_events(gateway)
    assert (json_event.prompt_tokens, json_event.priced.cached_tokens, json_event.completion_tokens) == (
        reply.usage.prompt_tokens, 4, 5)
    assert stream_event.completion_tokens == 3 and stream_event.prompt_tokens > 0
    for event in (json_event, stream_event):
        expected = chat_cost_inr_nano("my-gpt", event.prompt_tokens, event.priced.cached_tokens,
                                      event.completion_tokens)
        assert event.cost_inr_nano == event.charged_inr_nano == expected > 0
    assert Decimal(str(reply.usage.model_extra["cost_inr"])) * 1_000_000_000 == json_event.cost_inr_nano
    first, second = (await _records(gateway, simulator))[-2:]
    for record in (first, second):
        assert_sent_to_azure(record, api_version, "/chat/completions", "my-prod-gpt4o-mini")
        assert record["body"]["model"] == "my-prod-gpt4o-mini"
    assert second["body"]["stream_options"] == {"include_usage": True}


async def _records(gateway, simulator) -> list[dict]:
    return (await (await gateway.client.session.get(simulator.make_url("/_sim/requests"))).json())["data"]


async def test_responses_json_and_streamed(client, gateway, simulator, api_version):
    response = await client.responses.create(model="my-gpt", input="hello [sim:tokens=4]")
    assert response.output_text and response.usage.output_tokens == 4
    async with client.responses.stream(model="my-gpt", input="hi [sim:tokens=2]") as stream:
        events = [event async for event in stream]
    assert events[-1].type == "response.completed" and events[-1].response.usage.output_tokens == 2
    for event in await request_events(gateway):
        assert event.status == 200
        assert event.cost_inr_nano == chat_cost_inr_nano("my-gpt", event.prompt_tokens, event.priced.cached_tokens,
                                                         event.completion_tokens) > 0
    for record in (await _records(gateway, simulator))[-2:]:
        assert_sent_to_azure(record, api_version, "/responses", "my-prod-gpt4o-mini")
        assert record["body"]["model"] == "my-prod-gpt4o-mini"


async def test_embeddings_speech_and_transcription(client, gateway, simulator, api_version):
    embedded = await client.embeddings.create(model="my-embed", input=["one", "two three"])
    assert len(embedded.data) == 2 and embedded.usage.prompt_tokens > 0
    speech = await client.audio.speech.create(model="my-tts", voice="alloy", input="hello there")
    assert speech.content
    transcript = await client.audio.transcriptions.create(
        model="my-whisper", file=("a.mp3", io.BytesIO(silent_mp3(2)), "audio/mpeg"))
    assert transcript.text
    embed_event, speech_event, transcribe_event = await request_events(gateway)
    assert embed_event.cost_inr_nano == int(embedded.usage.prompt_tokens * price("my-embed", "prompt") * RATE
                                            * 1_000_000_000) > 0
    assert speech_event.cost_inr_nano > 0 and transcribe_event.cost_inr_nano > 0
    records = (await _records(gateway, simulator))[-3:]
    for record, (model, operation) in zip(records, [("my-embed", "/embeddings"), ("my-tts", "/audio/speech"),
                                                    ("my-whisper", "/audio/transcriptions")], strict=True):
        assert_sent_to_azure(record, api_version, operation, DEPLOYMENTS[model][1])


async def test_messages_stream_to_an_azure_model_opens_cleanly(gateway, org, no_anthropic_env):
    client = anthropic.AsyncAnthropic(base_url=gateway.url, api_key=org["api_key"], max_retries=0)
    async with client.messages.stream(model="my-gpt", max_tokens=64,
                                      messages=[{"role": "user", "content": "hi [sim:tokens=3]"}]) as stream:
        events = [event async for event in stream]
        final = await stream.get_final_message()
    assert events[0].type == "message_start" and events[0].message.id
    assert final.content[0].text and final.usage.output_tokens == 3
    (event,) = await request_events(gateway)
    assert event.status == 200 and event.cost_inr_nano > 0


@pytest.mark.parametrize(("directive", "status"), [("[sim:status=429]", 429), ("[sim:status=500]", 502),
                                                   ("[sim:status=503]", 502)])
async def test_upstream_failures_map_as_openais_do(gateway, org, directive, status):
    response = await gateway.client.post("/v1/chat/completions", headers=auth(org["api_key"]), json={
        "model": "my-gpt", "messages": [{"role": "user", "content": f"x {directive}"}]})
    assert response.status == status
    error = (await response.json())["error"]
    assert error["type"] == "gateway_error" and error["usedProvider"] == "azure"
    assert AZURE_API_KEY not in await response.text()
    (event,) = await request_events(gateway)
    assert event.status == status and event.charged_inr_nano == 0


async def test_the_shipped_azure_gpt_4o_mini_streams_its_usage_with_cached_tokens_priced(make_gateway, config,
                                                                                        simulator):
    gateway = await make_gateway(config)  # the shipped catalogue; azure is the simulator's v1 API
    org = await gateway.new_org("10")
    client = openai.AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=org["api_key"], max_retries=0)
    stream = await client.chat.completions.create(
        model="azure/gpt-4o-mini", stream=True, stream_options={"include_usage": True},
        messages=[{"role": "user", "content": "hello there friend [sim:tokens=4] [sim:cache_read=3]"}])
    chunks = [chunk async for chunk in stream]
    usage = chunks[-1].usage
    assert usage.completion_tokens == 4 and usage.prompt_tokens_details.cached_tokens == 3
    assert all(chunk.id for chunk in chunks)
    prices = {"prompt": Decimal("0.00000015"), "completion": Decimal("0.0000006"), "cached": Decimal("0.000000075")}
    usd = ((usage.prompt_tokens - 3) * prices["prompt"] + 3 * prices["cached"] + 4 * prices["completion"])
    (event,) = await request_events(gateway)
    assert event.provider == "azure" and event.charged_inr_nano == int(usd * RATE * 1_000_000_000)
    assert Decimal(str(usage.model_extra["cost_inr"])) == usd * RATE
    (record,) = await _records(gateway, simulator)
    assert record["path"] == "/openai/v1/chat/completions" and record["body"]["model"] == "gpt-4o-mini"
