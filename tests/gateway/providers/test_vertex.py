"""The vertex adapter behind the gateway, driven by the official openai and anthropic SDKs: Gemini
and Claude on Vertex AI at the simulator, the exact Vertex paths and bodies it received, and each
charge equal to the simulator's tokens at the vertex catalogue prices, cache tokens included."""

from decimal import Decimal

import pytest

from simulator.cloud_credentials import GOOGLE_PROJECT
from simulator.textgen import completion_text
from simulator.vertex_routes import vertex_call
from tests.support import post_chat, request_events, upstream_requests

RATE = Decimal("84.0")
CLAUDE, CLAUDE_UPSTREAM = "vertex/claude-sonnet-4-5", "claude-sonnet-4-5@20250929"
GEMINI = "vertex/gemini-2.5-flash"
# USD per token, the shipped catalogue's vertex rows (genai-prices: Vertex's global-endpoint rates).
SONNET = {"prompt": Decimal("0.000003"), "completion": Decimal("0.000015"),
          "read": Decimal("0.0000003"), "write": Decimal("0.00000375")}
FLASH = {"prompt": Decimal("0.0000003"), "completion": Decimal("0.0000025"), "read": Decimal("0.00000003")}

pytestmark = pytest.mark.usefixtures("no_anthropic_env")


def usd(prices: dict, prompt: int, completion: int, read: int = 0, write: int = 0) -> Decimal:
    """The exact cost of a usage: `prompt` includes the `read` and `write` cache tokens."""
    return ((prompt - read - write) * prices["prompt"] + read * prices["read"]
            + write * prices.get("write", 0) + completion * prices["completion"])


async def charges(gateway) -> list[Decimal]:
    """Each request's charge in INR, exactly, as the ledger recorded it."""
    return [Decimal(event.charged_inr_nano) / 10**9 for event in await request_events(gateway)]


async def vertex_calls(gateway, simulator) -> list[tuple[dict, dict]]:
    """(project, region, publisher, model, action) and the body of each Vertex call received."""
    return [(vertex_call(sent["path"]) or {}, sent) for sent in await upstream_requests(gateway, simulator)]


def openai_client(gateway, org):
    openai = pytest.importorskip("openai")
    return openai.AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=org["api_key"], max_retries=0)


def anthropic_client(gateway, org):
    anthropic = pytest.importorskip("anthropic")
    return anthropic.AsyncAnthropic(base_url=gateway.url, api_key=org["api_key"], max_retries=0)


# -- Claude -------------------------------------------------------------------------------------

async def test_claude_json_through_the_openai_sdk_goes_to_raw_predict_billed_with_cache_tokens(
        gateway, org, simulator):
    reply = await openai_client(gateway, org).chat.completions.create(
        model=CLAUDE, max_tokens=50, temperature=0.5,
        messages=[{"role": "system", "content": "Be brief."},
                  {"role": "user", "content": "w " * 20 + "[sim:cache_read=16] [sim:cache_write=2] [sim:tokens=3]"}])
    assert reply.choices[0].message.content == completion_text(3) and reply.model == CLAUDE_UPSTREAM
    usage = reply.usage
    assert usage.prompt_tokens_details.cached_tokens == 16 and usage.completion_tokens == 3
    expected = usd(SONNET, usage.prompt_tokens, 3, read=16, write=2) * RATE
    assert await charges(gateway) == [expected] and Decimal(str(usage.model_extra["cost_inr"])) == expected
    assert await gateway.balance(org["org_id"]) == 100 - expected
    ((call, sent),) = await vertex_calls(gateway, simulator)
    assert call == {"project": GOOGLE_PROJECT, "region": "us-east5", "publisher": "anthropic",
                    "model": CLAUDE_UPSTREAM, "action": "rawPredict"}
    assert sent["headers"]["authorization"].startswith("Bearer ya29.")
    assert "model" not in sent["body"] and sent["body"]["anthropic_version"] == "vertex-2023-10-16"
    assert (sent["body"]["max_tokens"], sent["body"]["system"], sent["body"]["temperature"]) == (50, "Be brief.", 0.5)


async def test_claude_streamed_through_the_openai_sdk_goes_to_stream_raw_predict(gateway, org, simulator):
    stream = await openai_client(gateway, org).chat.completions.create(
        model=f"vertex/{CLAUDE_UPSTREAM}", max_tokens=50, stream=True, stream_options={"include_usage": True},
        messages=[{"role": "user", "content": "a b c d [sim:cache_read=5] [sim:cache_write=3] [sim:tokens=4]"}])
    chunks = [chunk async for chunk in stream]
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == completion_text(4)
    usage = chunks[-1].usage
    assert usage.prompt_tokens_details.cached_tokens == 5 and usage.completion_tokens == 4
    assert await charges(gateway) == [usd(SONNET, usage.prompt_tokens, 4, read=5, write=3) * RATE]
    ((call, sent),) = await vertex_calls(gateway, simulator)
    assert (call["publisher"], call["model"], call["action"]) == ("anthropic", CLAUDE_UPSTREAM, "streamRawPredict")
    assert "model" not in sent["body"] and sent["body"]["anthropic_version"] == "vertex-2023-10-16"


async def test_the_anthropic_sdk_drives_claude_on_vertex_json_and_streamed(gateway, org, simulator):
    client = anthropic_client(gateway, org)
    message = await client.messages.create(
        model=CLAUDE, max_tokens=40, messages=[{"role": "user", "content": "x y z [sim:cache_read=2] [sim:tokens=5]"}])
    assert message.content[0].text == completion_text(5)
    assert (message.usage.output_tokens, message.usage.cache_read_input_tokens) == (5, 2)
    async with client.messages.stream(model=CLAUDE, max_tokens=40,
                                      messages=[{"role": "user", "content": "p q [sim:tokens=3]"}]) as stream:
        text = "".join([piece async for piece in stream.text_stream])
        final = await stream.get_final_message()
    assert text == completion_text(3) and final.usage.output_tokens == 3
    prompts = [message.usage.input_tokens + 2, final.usage.input_tokens]
    assert await charges(gateway) == [usd(SONNET, prompts[0], 5, read=2) * RATE, usd(SONNET, prompts[1], 3) * RATE]
    actions = [call["action"] for call, _ in await vertex_calls(gateway, simulator)]
    assert actions == ["rawPredict", "streamRawPredict"]


async def test_claude_without_max_tokens_is_refused_before_vertex_is_called(gateway, org, simulator):
    response = await post_chat(gateway, org, {"model": CLAUDE, "messages": [{"role": "user", "content": "hi"}]})
    assert response.status == 400
    error = (await response.json())["error"]
    assert error["param"] == "max_tokens" and "max_tokens" in error["message"]
    assert await upstream_requests(gateway, simulator) == []


# -- Gemini -------------------------------------------------------------------------------------

async def test_gemini_json_through_the_openai_sdk_goes_to_generate_content_billed_with_cache_and_thoughts(
        gateway, org, simulator):
    reply = await openai_client(gateway, org).chat.completions.create(
        model=GEMINI, messages=[{"role": "user", "content": "a b c d e f [sim:cached=4] [sim:thoughts=5]"}])
    usage = reply.usage
    assert usage.prompt_tokens_details.cached_tokens == 4
    assert usage.completion_tokens_details.reasoning_tokens == 5
    expected = usd(FLASH, usage.prompt_tokens, usage.completion_tokens, read=4) * RATE
    assert await charges(gateway) == [expected] and Decimal(str(usage.model_extra["cost_inr"])) == expected
    ((call, sent),) = await vertex_calls(gateway, simulator)
    assert call == {"project": GOOGLE_PROJECT, "region": "us-east5", "publisher": "google",
                    "model": "gemini-2.5-flash", "action": "generateContent"}
    (content,) = sent["body"]["contents"]
    assert content == {"role": "user", "parts": [{"text": "a b c d e f [sim:cached=4] [sim:thoughts=5]"}]}
    assert "x-goog-api-key" not in sent["headers"]


async def test_gemini_streamed_through_the_openai_sdk_goes_to_stream_generate_content(gateway, org, simulator):
    stream = await openai_client(gateway, org).chat.completions.create(
        model=GEMINI, max_tokens=30, stream=True, stream_options={"include_usage": True},
        messages=[{"role": "user", "content": "one two [sim:tokens=4] [sim:cached=2]"}])
    chunks = [chunk async for chunk in stream]
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == completion_text(4)
    usage = chunks[-1].usage
    assert await charges(gateway) == [usd(FLASH, usage.prompt_tokens, usage.completion_tokens, read=2) * RATE]
    ((call, sent),) = await vertex_calls(gateway, simulator)
    assert call["action"] == "streamGenerateContent" and sent["query"] == {"alt": "sse"}
    assert sent["body"]["generationConfig"] == {"maxOutputTokens": 30}


async def test_gemini_through_the_anthropic_sdk(gateway, org, simulator):
    message = await anthropic_client(gateway, org).messages.create(
        model=GEMINI, max_tokens=40, messages=[{"role": "user", "content": "hello [sim:tokens=2]"}])
    assert message.content[0].text == completion_text(2)
    assert await charges(gateway) == [usd(FLASH, message.usage.input_tokens, 2) * RATE]
    ((call, _),) = await vertex_calls(gateway, simulator)
    assert (call["publisher"], call["action"]) == ("google", "generateContent")
