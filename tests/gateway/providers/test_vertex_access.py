"""Vertex AI's access token, through the real gateway at the simulator: fetched once and shared by
every request until shortly before it expires, renewed then, dropped when Vertex answers 401;
from a service account file or the metadata server; a refused or missing credential a clean 502
naming vertex; no token or private key anywhere the gateway writes. Also the regional and
global endpoints, and streams that break mid-way."""

import asyncio
import json
from pathlib import Path

import msgspec
import orjson
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from google.auth.compute_engine import _metadata

from gateway.config import ProviderConfig
from gateway.providers.vertex.adapter import base_url
from simulator.cloud_credentials import SERVICE_ACCOUNT_PRIVATE_KEY, service_account_info
from simulator.vertex_routes import vertex_call
from tests.support import post_chat, request_events, sse_lines, upstream_requests

GEMINI, CLAUDE = "vertex/gemini-2.5-flash", "vertex/claude-haiku-4-5"
# A line from the middle of the test service account's private key: it must never be written out.
KEY_LINE = SERVICE_ACCOUNT_PRIVATE_KEY.splitlines()[5]


def ask(model: str = GEMINI, text: str = "hello [sim:tokens=2]", **extra) -> dict:
    return {"model": model, "max_tokens": 20, "messages": [{"role": "user", "content": text}], **extra}


def with_vertex(config, **changes):
    """`config` with its vertex provider changed."""
    vertex = msgspec.structs.replace(config.providers["vertex"], **changes)
    return msgspec.structs.replace(config, providers={**config.providers, "vertex": vertex})


async def tokens_issued(gateway, simulator) -> int:
    response = await gateway.client.session.get(simulator.make_url("/_sim/google/tokens"))
    return (await response.json())["issued"]


async def set_token_lifetime(gateway, simulator, seconds: int) -> None:
    response = await gateway.client.session.post(simulator.make_url("/_sim/google/token-lifetime"),
                                                 json={"seconds": seconds})
    assert response.status == 200


async def ok(gateway, org, body: dict) -> dict:
    response = await post_chat(gateway, org, body)
    assert response.status == 200, await response.text()
    return await response.json()


async def bearer_tokens(gateway, simulator) -> set[str]:
    """Every access token Vertex was sent."""
    return {sent["headers"]["authorization"].removeprefix("Bearer ")
            for sent in await upstream_requests(gateway, simulator) if vertex_call(sent["path"])}


def foreign_key_file(tmp_path: Path, sim_url: str) -> str:
    """A service account file like the simulator's, signed with another private key."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    path = tmp_path / "foreign-sa.json"
    path.write_text(json.dumps({**service_account_info(f"{sim_url}/token"), "private_key": pem}))
    return str(path)


# -- one token, renewed before it lapses ----------------------------------------------------------

async def test_many_requests_some_concurrent_share_one_token(gateway, org, simulator):
    assert await tokens_issued(gateway, simulator) == 0  # nothing is fetched at start-up
    await ok(gateway, org, ask())
    await asyncio.gather(*(ok(gateway, org, ask(model)) for model in [GEMINI, CLAUDE] * 6))
    await ok(gateway, org, ask(CLAUDE))
    assert await tokens_issued(gateway, simulator) == 1
    assert len(await bearer_tokens(gateway, simulator)) == 1


async def test_concurrent_first_requests_wait_for_one_fetch(gateway, org, simulator):
    await asyncio.gather(*(ok(gateway, org, ask()) for _ in range(10)))
    assert await tokens_issued(gateway, simulator) == 1


async def test_a_token_near_its_expiry_is_renewed_once_not_per_request(gateway, org, simulator):
    await set_token_lifetime(gateway, simulator, 4)  # renewed half way through, at 2 s
    for _ in range(3):
        await ok(gateway, org, ask())
    assert await tokens_issued(gateway, simulator) == 1
    await asyncio.sleep(4.5)  # past its expiry: the simulator would refuse it now
    await asyncio.gather(*(ok(gateway, org, ask()) for _ in range(4)))
    assert await tokens_issued(gateway, simulator) == 2


async def test_a_401_from_vertex_drops_the_token_and_the_next_request_fetches_anew(gateway, org, simulator):
    await ok(gateway, org, ask())
    response = await post_chat(gateway, org, ask(text="x [sim:status=401]"))
    assert response.status == 502  # the gateway's credentials failed, not the client's
    assert "vertex returned 401" in (await response.json())["error"]["message"]
    assert await tokens_issued(gateway, simulator) == 1
    await ok(gateway, org, ask())
    await ok(gateway, org, ask())
    assert await tokens_issued(gateway, simulator) == 2
    assert len(await bearer_tokens(gateway, simulator)) == 2


# -- where the credentials come from ------------------------------------------------------------------

async def test_metadata_server_credentials_and_project_without_a_file(make_gateway, config, simulator, sim_url,
                                                                      monkeypatch, tmp_path):
    host = sim_url.removeprefix("http://")
    for name in ("GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_PROJECT", "GCLOUD_PROJECT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path))  # no gcloud credentials of the machine's
    monkeypatch.setenv("GCE_METADATA_HOST", host)
    monkeypatch.setenv("GCE_METADATA_IP", host)
    monkeypatch.setattr(_metadata, "_GCE_METADATA_HOST", host)  # google-auth reads it when imported
    gateway = await make_gateway(with_vertex(config, credentials_file="", project="", region="europe-west4"))
    org = await gateway.new_org("100")
    await ok(gateway, org, ask())
    await ok(gateway, org, ask(CLAUDE))
    calls = [vertex_call(sent["path"]) for sent in await upstream_requests(gateway, simulator)]
    assert [(c["project"], c["region"]) for c in calls if c] == [("sim-project", "europe-west4")] * 2
    assert await tokens_issued(gateway, simulator) == 1


async def test_the_global_region_keeps_locations_global_in_the_path(make_gateway, config, simulator):
    gateway = await make_gateway(with_vertex(config, region="global"))
    org = await gateway.new_org("100")
    await ok(gateway, org, ask(CLAUDE))
    (sent,) = await upstream_requests(gateway, simulator)
    path = "/v1/projects/sim-project/locations/global/publishers/anthropic/models/claude-haiku-4-5@20251001"
    assert sent["path"] == f"{path}:rawPredict"


def test_the_host_is_the_regions_or_the_global_one_unless_configured():
    def url(**options) -> str:
        return base_url(ProviderConfig(protocol="vertex", **options))
    assert url() == "https://us-east5-aiplatform.googleapis.com"
    assert url(region="europe-west4") == "https://europe-west4-aiplatform.googleapis.com"
    assert url(region="global") == "https://aiplatform.googleapis.com"
    assert url(region="global", base_url="http://127.0.0.1:9/") == "http://127.0.0.1:9"


# -- refused, missing or broken ---------------------------------------------------------------------

async def test_a_token_endpoint_refusing_the_key_is_a_clean_502_naming_vertex(make_gateway, config, simulator,
                                                                             sim_url, tmp_path):
    gateway = await make_gateway(with_vertex(config, credentials_file=foreign_key_file(tmp_path, sim_url)))
    org = await gateway.new_org("100")
    for stream in (False, True):
        response = await post_chat(gateway, org, ask(stream=stream))
        assert response.status == 502 and response.content_type == "application/json"
        error = (await response.json())["error"]
        assert error["message"].startswith("vertex could not get an access token: RefreshError: invalid_grant")
        assert "PRIVATE KEY" not in error["message"] and "eyJ" not in error["message"]  # no key, no assertion
    assert await upstream_requests(gateway, simulator) == []  # Vertex never called without a token
    assert {event.status for event in await request_events(gateway)} == {502}
    assert await gateway.balance(org["org_id"]) == 100


async def test_a_missing_credentials_file_fails_requests_not_start_up(make_gateway, config, tmp_path):
    gateway = await make_gateway(with_vertex(config, credentials_file=str(tmp_path / "absent.json")))
    org = await gateway.new_org("100")
    response = await post_chat(gateway, org, ask(CLAUDE))
    assert response.status == 502
    assert (await response.json())["error"]["message"].startswith("vertex could not get an access token:")


@pytest.mark.parametrize("model", [GEMINI, CLAUDE])
async def test_a_stream_broken_mid_way_ends_with_an_error_and_no_charge(gateway, org, model):
    events = await sse_lines(await post_chat(gateway, org, ask(model, "x [sim:drop_after=2]", stream=True)))
    chunks = [orjson.loads(event) for event in events if event != b"[DONE]"]
    assert any(c.get("choices") and c["choices"][0]["delta"].get("content") for c in chunks)
    error = chunks[-1]["error"]
    assert error["type"] == "gateway_error" and "vertex" in error["message"]
    (event,) = await request_events(gateway)
    assert event.status == 502 and event.charged_inr_nano == 0
    assert await gateway.balance(org["org_id"]) == 100


# -- secrets ------------------------------------------------------------------------------------

async def test_no_access_token_or_private_key_is_written_anywhere(make_gateway, config, simulator, sim_url,
                                                                  tmp_path, capfd):
    gateway = await make_gateway(config)
    org = await gateway.new_org("100")
    bodies = [await (await post_chat(gateway, org, body)).text() for body in (
        ask(), ask(CLAUDE, stream=True), ask(text="x [sim:status=401]"), ask(CLAUDE, "x [sim:status=403]"),
        ask(CLAUDE, "x [sim:drop_after=1]", stream=True), ask(text="x [sim:error_after=1]", stream=True))]
    refused_config = with_vertex(config, credentials_file=foreign_key_file(tmp_path, sim_url))
    refused = await make_gateway(msgspec.structs.replace(
        refused_config, ledger=msgspec.structs.replace(config.ledger, url=f"sqlite:///{tmp_path}/refused.db")))
    refused_org = await refused.new_org("100")
    bodies.append(await (await post_chat(refused, refused_org, ask())).text())
    tokens = await bearer_tokens(gateway, simulator)
    assert len(tokens) == 2 and all(len(token) > 20 for token in tokens)
    logs = "".join(capfd.readouterr())
    assert "request" in logs  # the gateway's log lines were captured
    ledger = b"".join(path.read_bytes() for path in tmp_path.glob("*.db*"))
    for secret in [*tokens, KEY_LINE, "BEGIN PRIVATE KEY"]:
        assert all(secret not in body for body in bodies), secret
        assert secret not in logs and secret.encode() not in ledger, secret
