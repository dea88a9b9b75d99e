"""The official openai SDK works against the gateway unmodified."""

from decimal import Decimal

import pytest

from simulator.textgen import completion_text

openai = pytest.importorskip("openai")


@pytest.fixture
def client(gateway, org):
    return openai.AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=org["api_key"], max_retries=0)


async def test_sdk_completes_a_chat(client, gateway, org):
    reply = await client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "hello [sim:tokens=6]"}])
    assert reply.choices[0].message.content == completion_text(6)
    assert reply.usage.completion_tokens == 6
    cost = Decimal(str(reply.usage.model_extra["cost_inr"]))
    assert await gateway.balance(org["org_id"]) == Decimal(100) - cost


async def test_sdk_streams_a_chat_with_usage(client):
    stream = await client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "hello [sim:tokens=4]"}],
        stream=True, stream_options={"include_usage": True})
    chunks = [chunk async for chunk in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == completion_text(4)
    assert chunks[-1].usage.completion_tokens == 4


async def test_sdk_sees_errors_as_typed_exceptions(client):
    with pytest.raises(openai.RateLimitError):
        await client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "[sim:status=429]"}])
    with pytest.raises(openai.BadRequestError):
        await client.chat.completions.create(model="tune-3-clip-preview", messages=[{"role": "user", "content": "x"}])


async def test_sdk_with_bad_key_gets_authentication_error(gateway):
    client = openai.AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key="gwk_wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        await client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "x"}])


async def test_sdk_lists_models_without_a_key(gateway):
    client = openai.AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key="unused", max_retries=0)
    ids = {model.id async for model in client.models.list()}
    assert {"gpt-4o-mini", "claude-haiku-4-5", "tune-3-pro-preview"} <= ids
