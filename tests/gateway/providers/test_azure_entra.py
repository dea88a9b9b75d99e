"""Azure OpenAI with Microsoft Entra ID client credentials: the token comes from the configured
authority (the simulator), once for many requests, concurrent ones included; it is renewed before
it lapses; a refused grant is a clean 502 naming Entra's AADSTS code, never the secret; partial
credentials stop start-up with a message naming them. No key, secret or token reaches a client
or a log line."""

import asyncio

import pytest

from gateway.config import ConfigError
from simulator.cloud_credentials import AZURE_API_KEY, AZURE_CLIENT_SECRET, AZURE_TENANT_ID
from simulator.entra_token import ENTRA_TOKENS_KEY
from tests.gateway.gateway_helpers import ledger_toml, run_cli_async, write_config
from tests.gateway.providers.azure_support import API_VERSION, azure_provider, chat_cost_inr_nano, with_azure
from tests.support import auth, request_events

openai = pytest.importorskip("openai")


def ask(text: str = "hi [sim:tokens=2]") -> dict:
    return {"model": "my-gpt", "messages": [{"role": "user", "content": text}]}


async def issued(gateway, sim_url: str) -> int:
    async with gateway.client.session.get(f"{sim_url}/_sim/entra/tokens") as response:
        return (await response.json())["issued"]


async def records(gateway, sim_url: str) -> list[dict]:
    async with gateway.client.session.get(f"{sim_url}/_sim/requests") as response:
        return (await response.json())["data"]


@pytest.fixture(params=["", API_VERSION], ids=["v1", "deployments"])
async def gateway(request, make_gateway, config, sim_url, tmp_path):
    provider = azure_provider(sim_url, api_version=request.param, entra=True)
    return await make_gateway(with_azure(config, provider, tmp_path))


async def test_many_requests_concurrent_ones_too_share_one_token(gateway, org, sim_url):
    client = openai.AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=org["api_key"], max_retries=0)
    replies = await asyncio.gather(*(client.chat.completions.create(**ask()) for _ in range(12)))
    replies += [await client.chat.completions.create(**ask()) for _ in range(3)]
    stream = await client.chat.completions.create(**ask(), stream=True)
    assert [chunk async for chunk in stream]
    assert all(reply.choices[0].message.content for reply in replies)
    assert await issued(gateway, sim_url) == 1
    sent = [record["headers"] for record in await records(gateway, sim_url)]
    assert len(sent) == 16 and len({headers["authorization"] for headers in sent}) == 1
    assert all(headers["authorization"].startswith("Bearer ey") and "api-key" not in headers for headers in sent)
    for event in await request_events(gateway):
        assert event.charged_inr_nano == chat_cost_inr_nano("my-gpt", event.prompt_tokens, event.priced.cached_tokens,
                                                            event.completion_tokens) > 0


async def test_a_short_lived_token_is_renewed_before_it_lapses(gateway, org, sim_url):
    async with gateway.client.session.post(f"{sim_url}/_sim/entra/token-lifetime", json={"seconds": 2}) as response:
        assert response.status == 200
    first = await gateway.client.post("/v1/chat/completions", json=ask(), headers=auth(org["api_key"]))
    assert first.status == 200
    await asyncio.sleep(1.3)  # past half its life: renewed, though it is still good upstream
    second = await gateway.client.post("/v1/chat/completions", json=ask(), headers=auth(org["api_key"]))
    assert second.status == 200
    assert await issued(gateway, sim_url) == 2
    tokens = [record["headers"]["authorization"] for record in await records(gateway, sim_url)]
    assert tokens[0] != tokens[1]


async def test_a_wrong_secret_is_a_clean_502_naming_entras_refusal(make_gateway, config, sim_url, tmp_path, capsys):
    secret = "wrong-entra-secret-0123456789"
    gateway = await make_gateway(with_azure(config, azure_provider(sim_url, entra=True, client_secret=secret),
                                            tmp_path))
    org = await gateway.new_org("10")
    response = await gateway.client.post("/v1/chat/completions", json=ask(), headers=auth(org["api_key"]))
    text = await response.text()
    assert response.status == 502 and response.content_type == "application/json"
    error = (await response.json())["error"]
    assert "azure could not get an Entra ID token" in error["message"] and "AADSTS7000215" in error["message"]
    assert error["usedProvider"] == "azure"
    assert await records(gateway, sim_url) == []  # Azure itself was never asked
    (event,) = await request_events(gateway)
    assert event.status == 502 and event.charged_inr_nano == 0
    logged = capsys.readouterr()
    for leaked in (secret, AZURE_CLIENT_SECRET, AZURE_API_KEY):
        assert leaked not in text and leaked not in logged.out + logged.err and leaked not in event.error


async def test_no_key_secret_or_token_in_responses_or_logs(gateway, org, sim_url, capsys):
    ok = await gateway.client.post("/v1/chat/completions", json=ask(), headers=auth(org["api_key"]))
    failed = await gateway.client.post("/v1/chat/completions", json=ask("x [sim:status=500]"),
                                       headers=auth(org["api_key"]))
    bodies = await ok.text() + await failed.text()
    assert (ok.status, failed.status) == (200, 502)
    token = (await records(gateway, sim_url))[0]["headers"]["authorization"].removeprefix("Bearer ")
    logged = capsys.readouterr()
    for leaked in (token, AZURE_CLIENT_SECRET, AZURE_API_KEY):
        assert leaked not in bodies and leaked not in logged.out + logged.err
    assert all(leaked not in event.error for event in await request_events(gateway) for leaked in (token,))


@pytest.mark.parametrize("given", [{"tenant_id": AZURE_TENANT_ID}, {"client_secret": "s3cret-value-123"},
                                   {"tenant_id": AZURE_TENANT_ID, "client_id": "app"}])
async def test_partial_entra_credentials_stop_start_up(make_gateway, config, sim_url, tmp_path, given):
    provider = azure_provider(sim_url, **given)
    with pytest.raises(ConfigError, match="tenant_id, client_id and client_secret"):
        await make_gateway(with_azure(config, provider, tmp_path))


async def test_partial_entra_credentials_are_a_clean_cli_error(tmp_path, sim_url):
    text = ledger_toml(tmp_path / "ledger.db", '[server]\nport = 0\n[providers.azure]\nprotocol = "azure"\n'
                                               f'base_url = "{sim_url}/openai/v1"\ntenant_id = "{AZURE_TENANT_ID}"\n'
                                               'client_secret = "partial-secret-0123456789"\n')
    result = await run_cli_async("serve", "--config", str(write_config(tmp_path, text)))
    assert result.returncode == 2, result.stderr
    assert "client_id not set" in result.stderr and "Traceback" not in result.stderr
    assert "partial-secret-0123456789" not in result.stderr + result.stdout


async def test_a_token_azure_refuses_is_forgotten_and_the_next_request_fetches_anew(gateway, org, sim_url,
                                                                                   simulator):
    assert (await gateway.client.post("/v1/chat/completions", json=ask(), headers=auth(org["api_key"]))).status == 200
    simulator.app[ENTRA_TOKENS_KEY]._expiry.clear()  # revoked at Entra: Azure answers 401 to it from now on
    refused = await gateway.client.post("/v1/chat/completions", json=ask(), headers=auth(org["api_key"]))
    assert refused.status == 502 and "401" in (await refused.json())["error"]["message"]
    again = await gateway.client.post("/v1/chat/completions", json=ask(), headers=auth(org["api_key"]))
    assert again.status == 200
    assert await issued(gateway, sim_url) == 2


async def test_an_azure_provider_without_a_resource_serves_nothing(make_gateway, config, sim_url, tmp_path):
    # The shipped provider reads its base_url from AZURE_OPENAI_BASE_URL; unset, it is not a candidate.
    gateway = await make_gateway(with_azure(config, azure_provider(sim_url, base_url=""), tmp_path))
    org = await gateway.new_org("1")
    response = await gateway.client.post("/v1/chat/completions", json=ask(), headers=auth(org["api_key"]))
    assert response.status == 501 and "azure" in (await response.json())["error"]["message"]
