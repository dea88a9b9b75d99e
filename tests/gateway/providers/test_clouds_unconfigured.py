"""The shipped cloud providers stand unused until they can authenticate: a gateway whose
operator configured no AWS, Google or Azure credentials never fails a model over to them, and a
request pinned to one is told what to configure."""

import msgspec
import pytest

from gateway.config import Config
from ledger.events import RequestCompleted
from tests.support import auth

CLOUD_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                   "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                   "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_BEARER_TOKEN_BEDROCK",
                   "GOOGLE_APPLICATION_CREDENTIALS", "GCE_METADATA_HOST", "CLOUDSDK_CONFIG", "AZURE_OPENAI_BASE_URL",
                   "AZURE_OPENAI_API_KEY")


@pytest.fixture
async def uncredentialed(make_gateway, config, monkeypatch, tmp_path):
    """The simulator serves openai, anthropic and google; the clouds are as shipped, with no
    credentials anywhere the chains look (a fresh HOME, no variables)."""
    for name in CLOUD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    shipped = Config().providers
    providers = {**config.providers, **{name: shipped[name] for name in ("bedrock", "vertex", "azure")}}
    providers["bedrock"] = msgspec.structs.replace(providers["bedrock"], api_key="")
    providers["vertex"] = msgspec.structs.replace(providers["vertex"], project="")
    providers["azure"] = msgspec.structs.replace(providers["azure"], base_url="", api_key="")
    return await make_gateway(msgspec.structs.replace(config, providers=providers))


async def test_claude_failing_at_anthropic_is_not_tried_on_clouds_without_credentials(uncredentialed):
    org = await uncredentialed.new_org()
    response = await uncredentialed.client.post("/v1/chat/completions", headers=auth(org["api_key"]), json={
        "model": "claude-sonnet-4-5", "max_tokens": 10,
        "messages": [{"role": "user", "content": "x [sim:status=503]"}]})
    assert response.status == 502
    assert "anthropic returned 503" in (await response.json())["error"]["message"]
    (event,) = [r.event for r in await uncredentialed.events() if isinstance(r.event, RequestCompleted)]
    assert [attempt.provider for attempt in event.attempts] == ["anthropic"]


@pytest.mark.parametrize("model", ["bedrock/claude-sonnet-4-5", "vertex/gemini-2.5-flash", "azure/gpt-4o-mini"])
async def test_a_request_pinned_to_an_unconfigured_cloud_is_told_what_to_configure(uncredentialed, model):
    org = await uncredentialed.new_org()
    response = await uncredentialed.client.post("/v1/chat/completions", headers=auth(org["api_key"]), json={
        "model": model, "max_tokens": 10, "messages": [{"role": "user", "content": "x"}]})
    body = await response.json()
    provider = model.split("/")[0]
    assert response.status == 501 and f"[providers.{provider}]" in body["error"]["message"]
