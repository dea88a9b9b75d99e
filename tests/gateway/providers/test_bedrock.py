"""AWS Bedrock through the gateway, against the simulator speaking Bedrock's wire: Converse and
ConverseStream (AWS's binary event stream), InvokeModel embeddings, SigV4 from the AWS
credential chain or a Bedrock API key, AWS's errors, and every charge exact to the token at the
Bedrock entry's own price (cache reads and writes included)."""

import json
from decimal import Decimal

import msgspec
import pytest

from gateway.catalogue import SHIPPED_PATH, Catalogue
from ledger import audit
from ledger.events import RequestCompleted
from ledger.money import from_nano
from simulator.cloud_credentials import AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN
from tests.support import auth, decimal_json, sse_lines

RATE = Decimal("84.0")
SONNET_ID = "bedrock/claude-sonnet-4-5"
GLOBAL_SONNET = "global.anthropic.claude-sonnet-4-5-20250929-v1:0"
US_SONNET = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
ARN = "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/a1b2c3d4e5"
CATALOGUE = Catalogue.load()


def entry_prices(model: str) -> tuple[Decimal, Decimal, Decimal, Decimal]:
    prices = CATALOGUE.resolve(model).prices
    return prices.prompt, prices.completion, prices.input_cache_read, prices.input_cache_write


def expected_usd(model: str, usage: dict) -> Decimal:
    """Bedrock's own counts times the entry's prices: inputTokens excludes the cache's tokens."""
    prompt, completion, read, write = entry_prices(model)
    return (usage["inputTokens"] * prompt + usage["outputTokens"] * completion
            + usage.get("cacheReadInputTokens", 0) * read + usage.get("cacheWriteInputTokens", 0) * write)


async def bedrock_calls(gateway, simulator) -> list[dict]:
    """The simulator's record of Bedrock calls (how each authenticated), oldest first."""
    answer = await gateway.client.session.get(simulator.make_url("/_sim/bedrock/requests"))
    return (await answer.json())["data"]


async def charges(gateway) -> list[RequestCompleted]:
    return [r.event for r in await gateway.events() if isinstance(r.event, RequestCompleted)]


def ask(model: str, text: str, **extra) -> dict:
    return {"model": model, "messages": [{"role": "user", "content": text}], "max_tokens": 64, **extra}


@pytest.fixture
def aws_env(monkeypatch):
    """The AWS credential chain's environment source: the simulator's test keys and session token."""
    for name in ("AWS_PROFILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_BEARER_TOKEN_BEDROCK"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", AWS_ACCESS_KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", AWS_SECRET_ACCESS_KEY)
    monkeypatch.setenv("AWS_SESSION_TOKEN", AWS_SESSION_TOKEN)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # never the instance metadata service


def with_bedrock(config, **options):
    bedrock = msgspec.structs.replace(config.providers["bedrock"], **options)
    return msgspec.structs.replace(config, providers={**config.providers, "bedrock": bedrock})


@pytest.fixture
async def signed(make_gateway, config, aws_env):
    """A gateway whose Bedrock requests are signed with SigV4 (no API key), in eu-west-1."""
    return await make_gateway(with_bedrock(config, api_key="", region="eu-west-1"))


async def test_converse_is_signed_with_sigv4_from_the_credential_chain_and_billed_exactly(signed, simulator):
    org = await signed.new_org()
    text = "one two three four [sim:cache_read=2] [sim:cache_write=3] [sim:tokens=5]"
    response = await signed.client.post("/v1/chat/completions", json=ask("bedrock/claude-sonnet-4-5", text),
                                        headers=auth(org["api_key"]))
    body = decimal_json(await response.read())
    assert response.status == 200, body
    (call,) = await bedrock_calls(signed, simulator)
    assert (call["auth"], call["region"], call["access_key_id"], call["session_token"]) == \
        ("sigv4", "eu-west-1", AWS_ACCESS_KEY_ID, True)
    assert call["model_id"] == GLOBAL_SONNET and call["operation"] == "Converse"
    (sent,) = await sim_records_of(signed, simulator)
    assert sent["path"] == "/model/global.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse"
    usage = {"inputTokens": body["usage"]["prompt_tokens"] - 5, "outputTokens": 5,
             "cacheReadInputTokens": 2, "cacheWriteInputTokens": 3}
    assert body["usage"]["prompt_tokens_details"] == {"cached_tokens": 2}
    assert body["usage"]["cost_usd_total"] == expected_usd("bedrock/claude-sonnet-4-5", usage)
    (event,) = await charges(signed)
    assert (event.provider, event.status) == ("bedrock", 200)
    assert from_nano(event.charged_inr_nano) == expected_usd("bedrock/claude-sonnet-4-5", usage) * RATE


async def sim_records_of(gateway, simulator) -> list[dict]:
    answer = await gateway.client.session.get(simulator.make_url("/_sim/requests"))
    return [record for record in (await answer.json())["data"] if record["path"].startswith("/model/")]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(("model", "read", "write", "tokens"), [
    ("bedrock/claude-sonnet-4-5", 0, 0, 1), ("bedrock/" + US_SONNET, 7, 0, 9),
    ("bedrock/anthropic.claude-sonnet-4-5-20250929-v1:0", 0, 11, 3), ("bedrock/claude-haiku-4-5", 4, 6, 20),
    ("bedrock/us.anthropic.claude-haiku-4-5-20251001-v1:0", 13, 2, 2)])
async def test_each_entry_is_charged_its_own_price_streamed_or_not(gateway, org, model, read, write, tokens, stream):
    """The same model at three prices (the global profile, the `us.` profile, in-region): each
    request pays what the entry that answered lists, its cache reads and writes at their prices."""
    text = "w " * 30 + f"[sim:cache_read={read}] [sim:cache_write={write}] [sim:tokens={tokens}]"
    response = await gateway.client.post("/v1/chat/completions", headers=auth(org["api_key"]),
                                         json=ask(model, text, stream=stream,
                                                  stream_options={"include_usage": True} if stream else None))
    assert response.status == 200
    usage = (decimal_json((await sse_lines(response))[-2]) if stream else decimal_json(await response.read()))["usage"]
    assert usage["completion_tokens"] == tokens
    assert usage.get("prompt_tokens_details", {"cached_tokens": 0}) == {"cached_tokens": read}
    bedrock_usage = {"inputTokens": usage["prompt_tokens"] - read - write, "outputTokens": tokens,
                     "cacheReadInputTokens": read, "cacheWriteInputTokens": write}
    (event,) = await charges(gateway)
    assert from_nano(event.charged_inr_nano) == expected_usd(model, bedrock_usage) * RATE
    assert event.charged_inr_nano > 0
    assert (await audit.verify(gateway.ledger.recorder))[1] == []


async def test_a_bedrock_api_key_from_the_environment_is_sent_as_a_bearer_token(make_gateway, config, monkeypatch,
                                                                                simulator):
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", "ABSK-from-the-environment-123")
    gateway = await make_gateway(with_bedrock(config, api_key=""))
    org = await gateway.new_org()
    response = await gateway.client.post("/v1/chat/completions", json=ask(SONNET_ID, "hi"),
                                         headers=auth(org["api_key"]))
    assert response.status == 200
    (sent,) = await sim_records_of(gateway, simulator)
    assert sent["headers"]["authorization"] == "Bearer ABSK-from-the-environment-123"


async def test_an_application_inference_profile_arn_is_sent_encoded_and_signed(make_gateway, config, aws_env,
                                                                               simulator, tmp_path):
    """An operator's catalogue row whose modelName is an ARN: its `:` and `/` go percent-encoded,
    as AWS's clients send them, the signature over that path holds, and it is billed at its row's price."""
    shipped = json.loads(SHIPPED_PATH.read_text())
    record = next(r for r in shipped["data"] if r["id"] == "claude-haiku-4-5")
    entry = next(e for e in record["providers"] if e["modelName"].startswith("global."))
    record["providers"] = [{**entry, "modelName": ARN, "pricing": {**entry["pricing"], "prompt": "0.0000021"}}]
    (tmp_path / "catalogue.json").write_text(json.dumps({"data": [record]}))
    gateway = await make_gateway(msgspec.structs.replace(
        with_bedrock(config, api_key=""), catalogue=msgspec.structs.replace(config.catalogue,
                                                                            path=str(tmp_path / "catalogue.json"))))
    org = await gateway.new_org()
    response = await gateway.client.post("/v1/chat/completions", json=ask("bedrock/" + ARN, "hi [sim:tokens=3]"),
                                         headers=auth(org["api_key"]))
    body = decimal_json(await response.read())
    assert response.status == 200, body
    (sent,) = await sim_records_of(gateway, simulator)
    encoded = "arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Aapplication-inference-profile%2Fa1b2c3d4e5"
    assert sent["path"] == f"/model/{encoded}/converse"
    (call,) = await bedrock_calls(gateway, simulator)
    assert (call["auth"], call["model_id"]) == ("sigv4", ARN)
    assert body["usage"]["cost_usd_input"] == body["usage"]["prompt_tokens"] * Decimal("0.0000021")
