"""The simulator as Google Vertex AI: its token endpoint and metadata server driven by google-auth,
Gemini and Claude on Vertex driven by aiohttp and by the anthropic SDK's AnthropicVertex."""

import asyncio
import base64
import datetime
import time
from typing import Any

import aiohttp
import orjson
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from google.auth import crypt, jwt
from google.auth.compute_engine import _metadata
from google.auth.compute_engine import credentials as compute_engine
from google.auth.exceptions import RefreshError
from google.auth.transport.requests import Request
from google.oauth2 import service_account

from simulator.cloud_credentials import (
    GOOGLE_PROJECT,
    SERVICE_ACCOUNT_EMAIL,
    SERVICE_ACCOUNT_KEY_ID,
    SERVICE_ACCOUNT_PRIVATE_KEY,
    service_account_info,
)
from simulator.google_token import CLOUD_PLATFORM_SCOPE
from simulator.vertex_routes import vertex_call

CLAUDE = "claude-sonnet-4-5@20250929"


def models_url(sim_url: str, publisher: str, model_action: str, *, region: str = "us-east5",
               project: str = GOOGLE_PROJECT) -> str:
    return f"{sim_url}/v1/projects/{project}/locations/{region}/publishers/{publisher}/models/{model_action}"


async def service_account_credentials(sim_url: str) -> service_account.Credentials:
    """The shared service account's credentials, refreshed by google-auth at the simulator."""
    credentials = service_account.Credentials.from_service_account_info(
        service_account_info(f"{sim_url}/token"), scopes=[CLOUD_PLATFORM_SCOPE])
    await asyncio.to_thread(credentials.refresh, Request())
    return credentials


async def service_account_token(sim_url: str) -> str:
    """An access token as google-auth obtains it for the shared service account."""
    return (await service_account_credentials(sim_url)).token


async def post(url: str, body: Any, token: str) -> tuple[int, bytes]:
    headers = {"Authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession() as session, session.post(url, json=body, headers=headers) as response:
        return response.status, await response.read()


async def issued(sim_url: str) -> int:
    async with aiohttp.ClientSession() as session, session.get(f"{sim_url}/_sim/google/tokens") as response:
        return (await response.json())["issued"]


def claude_body(text: str = "hello [sim:tokens=3]", **extra: Any) -> dict[str, Any]:
    return {"anthropic_version": "vertex-2023-10-16", "max_tokens": 50,
            "messages": [{"role": "user", "content": text}], **extra}


def gemini_body(text: str) -> dict[str, Any]:
    return {"contents": [{"role": "user", "parts": [{"text": text}]}]}


# -- the token endpoint -------------------------------------------------------------------------

async def test_google_auth_service_account_gets_a_token_once(sim_url):
    credentials = await service_account_credentials(sim_url)
    assert credentials.valid and credentials.token.startswith("ya29.sim-")
    lifetime = credentials.expiry - datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
    assert 3500 < lifetime.total_seconds() <= 3600
    assert await issued(sim_url) == 1


def signed_assertion(sim_url: str, *, key: str = SERVICE_ACCOUNT_PRIVATE_KEY, kid: str = SERVICE_ACCOUNT_KEY_ID,
                     **claims: Any) -> bytes:
    now = int(time.time())
    payload = {"iss": SERVICE_ACCOUNT_EMAIL, "aud": f"{sim_url}/token", "iat": now, "exp": now + 3600,
               "scope": CLOUD_PLATFORM_SCOPE, **claims}
    return jwt.encode(crypt.RSASigner.from_string(key, kid), payload)


def other_private_key() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


async def exchange(sim_url: str, assertion: bytes) -> tuple[int, dict[str, Any]]:
    form = {"grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer", "assertion": assertion.decode()}
    async with aiohttp.ClientSession() as session, session.post(f"{sim_url}/token", data=form) as response:
        return response.status, await response.json()


async def test_a_well_signed_assertion_is_exchanged(sim_url):
    status, body = await exchange(sim_url, signed_assertion(sim_url))
    assert status == 200 and body["token_type"] == "Bearer" and body["expires_in"] == 3600
    assert body["access_token"].startswith("ya29.sim-")


@pytest.mark.parametrize("spoil", ["other_key", "kid", "iss", "aud", "scope", "too_long", "expired"])
async def test_a_wrong_assertion_is_refused(sim_url, spoil):
    now = int(time.time())
    options: dict[str, Any] = {
        "other_key": {"key": other_private_key()}, "kid": {"kid": "other-key"},
        "iss": {"iss": "someone@else.iam.gserviceaccount.com"}, "aud": {"aud": "https://example.com/token"},
        "scope": {"scope": "https://www.googleapis.com/auth/userinfo.email"},
        "too_long": {"iat": now, "exp": now + 7200}, "expired": {"iat": now - 7200, "exp": now - 3600},
    }[spoil]
    status, body = await exchange(sim_url, signed_assertion(sim_url, **options))
    assert status == 400 and body["error"] == "invalid_grant" and body["error_description"]
    assert await issued(sim_url) == 0


async def test_a_tampered_assertion_is_refused(sim_url):
    header, payload, signature = signed_assertion(sim_url).split(b".")
    claims = orjson.loads(base64.urlsafe_b64decode(payload + b"=" * (-len(payload) % 4)))
    forged = base64.urlsafe_b64encode(orjson.dumps({**claims, "exp": claims["exp"] + 1})).rstrip(b"=")
    status, body = await exchange(sim_url, b".".join([header, forged, signature]))
    assert (status, body["error"]) == (400, "invalid_grant")


async def test_google_auth_sees_a_refused_grant(sim_url):
    info = {**service_account_info(f"{sim_url}/token"), "private_key": other_private_key()}
    credentials = service_account.Credentials.from_service_account_info(info, scopes=[CLOUD_PLATFORM_SCOPE])
    with pytest.raises(RefreshError, match="invalid_grant"):
        await asyncio.to_thread(credentials.refresh, Request())


async def test_token_lifetime_is_set_at_run_time_and_expired_tokens_are_refused(sim_url):
    lifetime_url = f"{sim_url}/_sim/google/token-lifetime"
    async with aiohttp.ClientSession() as session, session.post(lifetime_url, json={"seconds": 1}) as response:
        assert await response.json() == {"issued": 0, "lifetime_s": 1}
    token = await service_account_token(sim_url)
    url = models_url(sim_url, "google", "gemini-2.5-flash:generateContent")
    assert (await post(url, gemini_body("hi [sim:tokens=1]"), token))[0] == 200
    await asyncio.sleep(1.1)
    status, body = await post(url, gemini_body("hi"), token)
    assert status == 401 and orjson.loads(body)["error"]["status"] == "UNAUTHENTICATED"


# -- the metadata server ------------------------------------------------------------------------

@pytest.fixture
def metadata_host(sim_url, monkeypatch) -> str:
    """google-auth's metadata server is the simulator (the host is read when google-auth is imported)."""
    host = sim_url.removeprefix("http://")
    monkeypatch.setenv("GCE_METADATA_HOST", host)
    monkeypatch.setenv("GCE_METADATA_IP", host)
    monkeypatch.setattr(_metadata, "_GCE_METADATA_HOST", host)
    return host


async def test_compute_engine_credentials_get_a_token(sim_url, metadata_host):
    assert await asyncio.to_thread(_metadata.ping, Request())
    credentials = compute_engine.Credentials()
    await asyncio.to_thread(credentials.refresh, Request())
    assert credentials.token.startswith("ya29.sim-") and credentials.service_account_email == SERVICE_ACCOUNT_EMAIL
    assert await asyncio.to_thread(_metadata.get_project_id, Request()) == GOOGLE_PROJECT
    status, _ = await post(models_url(sim_url, "google", "gemini-2.5-flash:generateContent"),
                           gemini_body("hi [sim:tokens=1]"), credentials.token)
    assert status == 200 and await issued(sim_url) == 1


async def test_the_metadata_server_wants_its_flavor_header(sim_url):
    url = f"{sim_url}/computeMetadata/v1/instance/service-accounts/default/token"
    async with aiohttp.ClientSession() as session:
        async with session.get(url) as response:
            assert response.status == 403
        async with session.get(url, headers={"Metadata-Flavor": "Google"}) as response:
            assert response.status == 200 and response.headers["Metadata-Flavor"] == "Google"
            assert (await response.json())["token_type"] == "Bearer"


# -- Vertex routes ------------------------------------------------------------------------------

async def test_gemini_on_vertex_answers_as_the_gemini_api(sim_url):
    token = await service_account_token(sim_url)
    text = "hi [sim:tokens=3] [sim:cached=2] [sim:thoughts=5]"
    status, raw = await post(models_url(sim_url, "google", "gemini-2.5-flash:generateContent", region="global"),
                             gemini_body(text), token)
    body = orjson.loads(raw)
    assert status == 200 and body["candidates"][0]["finishReason"] == "STOP"
    usage = body["usageMetadata"]
    assert usage["candidatesTokenCount"] == 3 and usage["cachedContentTokenCount"] == 2
    assert usage["thoughtsTokenCount"] == 5
    status, raw = await post(models_url(sim_url, "google", "gemini-2.5-flash:streamGenerateContent?alt=sse"),
                             gemini_body("hi [sim:tokens=3]"), token)
    events = [orjson.loads(line.removeprefix(b"data: ")) for line in raw.split(b"\r\n\r\n") if line]
    assert status == 200 and len(events) == 4 and events[-1]["candidates"][0]["finishReason"] == "STOP"
    assert await issued(sim_url) == 1


async def test_claude_on_vertex_answers_as_anthropic(sim_url):
    token = await service_account_token(sim_url)
    status, raw = await post(models_url(sim_url, "anthropic", f"{CLAUDE}:rawPredict"), claude_body(), token)
    message = orjson.loads(raw)
    assert status == 200 and message["type"] == "message" and message["model"] == CLAUDE
    assert message["usage"]["output_tokens"] == 3 and message["stop_reason"] == "end_turn"
    status, raw = await post(models_url(sim_url, "anthropic", f"{CLAUDE}:streamRawPredict", region="global"),
                             claude_body(stream=True), token)
    names = [frame.split(b"\n")[0] for frame in raw.split(b"\n\n") if frame]
    assert status == 200 and names[0] == b"event: message_start" and names[-1] == b"event: message_stop"


@pytest.mark.parametrize(("body", "message"), [
    (claude_body(model=CLAUDE), "model"),
    ({**claude_body(), "anthropic_version": "vertex-2024-01-01"}, "anthropic_version"),
    ({**claude_body(), "anthropic_version": "latest"}, "anthropic_version"),
    ({key: value for key, value in claude_body().items() if key != "anthropic_version"}, "anthropic_version"),
])
async def test_claude_on_vertex_refuses_a_messages_api_body(sim_url, body, message):
    token = await service_account_token(sim_url)
    status, raw = await post(models_url(sim_url, "anthropic", f"{CLAUDE}:rawPredict"), body, token)
    error = orjson.loads(raw)
    assert status == 400 and error["error"]["type"] == "invalid_request_error" and message in error["error"]["message"]


async def test_vertex_wants_a_token_it_issued_and_its_project(sim_url):
    url = models_url(sim_url, "google", "gemini-2.5-flash:generateContent")
    for token in ("", "ya29.forged"):
        status, raw = await post(url, gemini_body("hi"), token)
        assert status == 401
        assert orjson.loads(raw)["error"]["status"] == "UNAUTHENTICATED" and orjson.loads(raw)["error"]["code"] == 401
    token = await service_account_token(sim_url)
    status, raw = await post(models_url(sim_url, "google", "gemini-2.5-flash:generateContent", project="other"),
                             gemini_body("hi"), token)
    assert status == 403 and orjson.loads(raw)["error"]["status"] == "PERMISSION_DENIED"
    status, raw = await post(models_url(sim_url, "google", "gemini-nope:generateContent"), gemini_body("hi"), token)
    assert status == 404 and orjson.loads(raw)["error"]["status"] == "NOT_FOUND"


async def test_vertex_calls_are_recorded_with_their_place(sim_url):
    token = await service_account_token(sim_url)
    await post(models_url(sim_url, "anthropic", f"{CLAUDE}:rawPredict", region="europe-west1"), claude_body(), token)
    async with aiohttp.ClientSession() as session, session.get(f"{sim_url}/_sim/requests") as response:
        record = (await response.json())["data"][-1]
    assert vertex_call(record["path"]) == {"project": GOOGLE_PROJECT, "region": "europe-west1",
                                           "publisher": "anthropic", "model": CLAUDE, "action": "rawPredict"}
    assert record["body"] == claude_body() and record["outcome"] == "completed"
    assert record["headers"]["authorization"] == f"Bearer {token}"


# -- the anthropic SDK's Vertex client, unmodified ----------------------------------------------

@pytest.mark.usefixtures("no_anthropic_env")
async def test_anthropic_vertex_sdk_creates_and_streams(sim_url):
    anthropic = pytest.importorskip("anthropic")
    token = await service_account_token(sim_url)
    client = anthropic.AsyncAnthropicVertex(base_url=f"{sim_url}/v1", region="us-east5", project_id=GOOGLE_PROJECT,
                                            access_token=token, max_retries=0)
    message = await client.messages.create(model=CLAUDE, max_tokens=50,
                                           messages=[{"role": "user", "content": "hi [sim:tokens=4]"}])
    assert message.usage.output_tokens == 4 and message.content[0].type == "text"
    async with client.messages.stream(model=CLAUDE, max_tokens=50,
                                      messages=[{"role": "user", "content": "hi [sim:tokens=3]"}]) as stream:
        text = "".join([piece async for piece in stream.text_stream])
        final = await stream.get_final_message()
    assert text == final.content[0].text and final.usage.output_tokens == 3
    async with aiohttp.ClientSession() as session, session.get(f"{sim_url}/_sim/requests") as response:
        paths = [record["path"] for record in (await response.json())["data"]]
    assert [vertex_call(path)["action"] for path in paths] == ["rawPredict", "streamRawPredict"]
