"""The simulator as Azure OpenAI: the deployments path and the v1 API driven by the openai SDK's
AzureOpenAI and OpenAI clients, api-key and Entra ID credentials, and Azure's wire quirks."""

import asyncio
from typing import Any

import aiohttp
import openai
import orjson
import pytest

from simulator.cloud_credentials import AZURE_API_KEY, AZURE_CLIENT_ID, AZURE_CLIENT_SECRET, AZURE_TENANT_ID
from simulator.mp3 import silent_mp3
from tests.support import transcription_form

API_VERSION = "2024-10-21"
DEPLOYMENT = "gpt-4o-mini-prod"
KEY = {"api-key": AZURE_API_KEY}
MESSAGES = [{"role": "user", "content": "hi [sim:tokens=3]"}]


def chat_body(**extra: Any) -> dict[str, Any]:
    return {"messages": MESSAGES, **extra}


async def post(url: str, *, headers: dict[str, str] | None = None, **options: Any) -> tuple[int, bytes]:
    async with aiohttp.ClientSession() as session, session.post(url, headers=headers, **options) as response:
        return response.status, await response.read()


async def get_json(url: str) -> Any:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return await response.json()


async def entra_token(sim_url: str, tenant: str = AZURE_TENANT_ID, **form: str) -> tuple[int, dict[str, Any]]:
    data = {"grant_type": "client_credentials", "client_id": AZURE_CLIENT_ID, "client_secret": AZURE_CLIENT_SECRET,
            "scope": "https://cognitiveservices.azure.com/.default", **form}
    status, raw = await post(f"{sim_url}/{tenant}/oauth2/v2.0/token", data=data)
    return status, orjson.loads(raw)


def azure_client(sim_url: str, **credentials: Any) -> openai.AsyncAzureOpenAI:
    return openai.AsyncAzureOpenAI(azure_endpoint=sim_url, api_version=API_VERSION, max_retries=0,
                                   **(credentials or {"api_key": AZURE_API_KEY}))


# -- the deployments path through AzureOpenAI ---------------------------------------------------

async def test_azure_openai_sdk_chat_stream_and_embeddings(sim_url):
    client = azure_client(sim_url)
    completion = await client.chat.completions.create(model=DEPLOYMENT, messages=MESSAGES)
    assert completion.choices[0].message.content == "the quick brown " and completion.usage.completion_tokens == 3
    assert completion.model_extra["prompt_filter_results"][0]["prompt_index"] == 0
    assert completion.choices[0].model_extra["content_filter_results"]["hate"] == {"filtered": False,
                                                                                   "severity": "safe"}
    stream = await client.chat.completions.create(model=DEPLOYMENT, messages=MESSAGES, stream=True,
                                                  stream_options={"include_usage": True})
    chunks = [chunk async for chunk in stream]
    assert chunks[0].choices == [] and chunks[0].model_extra["prompt_filter_results"]
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "the quick brown "
    assert chunks[-1].usage.completion_tokens == 3
    embeddings = await client.embeddings.create(model="text-embedding-3-small", input=["one", "two"])
    assert len(embeddings.data) == 2 and len(embeddings.data[0].embedding) == 1536
    paths = [record["path"] for record in (await get_json(f"{sim_url}/_sim/requests"))["data"]]
    assert paths == [f"/openai/deployments/{DEPLOYMENT}/chat/completions"] * 2 + [
        "/openai/deployments/text-embedding-3-small/embeddings"]


async def test_a_stream_opens_with_empty_choices_and_filters_each_choice(sim_url):
    url = f"{sim_url}/openai/deployments/{DEPLOYMENT}/chat/completions?api-version={API_VERSION}"
    status, raw = await post(url, headers=KEY, json=chat_body(stream=True))
    frames = [frame.removeprefix(b"data: ") for frame in raw.split(b"\n\n") if frame]
    assert status == 200 and frames[-1] == b"[DONE]"
    chunks = [orjson.loads(frame) for frame in frames[:-1]]
    assert {key: value for key, value in chunks[0].items() if key != "prompt_filter_results"} == {
        "choices": [], "created": 0, "id": "", "model": "", "object": ""}
    assert chunks[1]["choices"][0]["delta"]["role"] == "assistant" and chunks[1]["model"] == DEPLOYMENT
    assert [bool(chunk["choices"][0]["content_filter_results"]) for chunk in chunks[1:]] == [False] + [True] * 3 + [
        False]
    assert all("usage" not in chunk for chunk in chunks)


async def test_the_deployment_is_the_model(sim_url):
    url = f"{sim_url}/openai/deployments/{DEPLOYMENT}/chat/completions?api-version={API_VERSION}"
    status, raw = await post(url, headers=KEY, json=chat_body(model="something-else"))
    assert status == 200 and orjson.loads(raw)["model"] == DEPLOYMENT


async def test_the_deployments_path_wants_an_api_version(sim_url):
    status, raw = await post(f"{sim_url}/openai/deployments/{DEPLOYMENT}/chat/completions", headers=KEY,
                             json=chat_body())
    assert (status, orjson.loads(raw)) == (404, {"error": {"code": "404", "message": "Resource not found"}})


async def test_audio_on_the_deployments_path(sim_url):
    base = f"{sim_url}/openai/deployments"
    status, audio = await post(f"{base}/tts/audio/speech?api-version={API_VERSION}", headers=KEY,
                               json={"input": "hello there", "voice": "alloy"})
    assert status == 200 and len(audio) > 0
    # The deployment names the model: a gpt-4o transcriber bills tokens, whisper-1 seconds.
    status, raw = await post(f"{base}/gpt-4o-transcribe/audio/transcriptions?api-version={API_VERSION}",
                             headers=KEY, data=transcription_form(silent_mp3(2.0), model="whisper-1"))
    assert status == 200 and orjson.loads(raw)["usage"]["type"] == "tokens"
    status, raw = await post(f"{sim_url}/openai/v1/audio/transcriptions", headers=KEY,
                             data=transcription_form(silent_mp3(2.0), model="whisper-1"))
    assert status == 200 and orjson.loads(raw)["usage"]["type"] == "duration"


# -- credentials --------------------------------------------------------------------------------

async def test_a_wrong_key_is_an_authentication_error(sim_url):
    client = azure_client(sim_url, api_key="wrong")
    with pytest.raises(openai.AuthenticationError) as caught:
        await client.chat.completions.create(model=DEPLOYMENT, messages=MESSAGES)
    assert caught.value.status_code == 401
    status, raw = await post(f"{sim_url}/openai/v1/chat/completions", json=chat_body(model=DEPLOYMENT))
    error = orjson.loads(raw)["error"]
    assert status == 401 and error["code"] == "401" and error["message"].startswith("Access denied due to invalid")


async def test_entra_tokens_open_azure_openai(sim_url):
    status, token = await entra_token(sim_url)
    assert status == 200 and token["token_type"] == "Bearer" and token["expires_in"] == 3599
    assert token["ext_expires_in"] == 3599 and token["access_token"].count(".") == 2

    async def provider() -> str:
        return token["access_token"]

    client = azure_client(sim_url, azure_ad_token_provider=provider)
    completion = await client.chat.completions.create(model=DEPLOYMENT, messages=MESSAGES)
    assert completion.choices[0].message.content == "the quick brown "
    record = (await get_json(f"{sim_url}/_sim/requests"))["data"][-1]
    assert record["headers"]["authorization"] == f"Bearer {token['access_token']}"
    assert "api-key" not in record["headers"]
    assert await get_json(f"{sim_url}/_sim/entra/tokens") == {"issued": 1, "lifetime_s": 3599}
    client = azure_client(sim_url, azure_ad_token="forged.jwt.token")
    with pytest.raises(openai.AuthenticationError):
        await client.chat.completions.create(model=DEPLOYMENT, messages=MESSAGES)


@pytest.mark.parametrize(("tenant", "form", "status", "error", "code"), [
    ("00000000-0000-4000-8000-000000000000", {}, 400, "invalid_request", "AADSTS90002"),
    (AZURE_TENANT_ID, {"client_id": "someone"}, 400, "unauthorized_client", "AADSTS700016"),
    (AZURE_TENANT_ID, {"client_secret": "wrong"}, 401, "invalid_client", "AADSTS7000215"),
    (AZURE_TENANT_ID, {"scope": "https://graph.microsoft.com/.default"}, 400, "invalid_scope", "AADSTS1002012"),
    (AZURE_TENANT_ID, {"grant_type": "password"}, 400, "unsupported_grant_type", "AADSTS70003"),
])
async def test_entra_refuses_a_wrong_grant(sim_url, tenant, form, status, error, code):
    answer = await entra_token(sim_url, tenant, **form)
    assert answer[0] == status and answer[1]["error"] == error
    assert answer[1]["error_description"].startswith(code + ":")
    assert (await get_json(f"{sim_url}/_sim/entra/tokens"))["issued"] == 0


async def test_an_expired_entra_token_is_refused(sim_url):
    async with aiohttp.ClientSession() as session:
        await session.post(f"{sim_url}/_sim/entra/token-lifetime", json={"seconds": 1})
    _, token = await entra_token(sim_url)
    url = f"{sim_url}/openai/deployments/{DEPLOYMENT}/chat/completions?api-version={API_VERSION}"
    bearer = {"Authorization": f"Bearer {token['access_token']}"}
    assert (await post(url, headers=bearer, json=chat_body()))[0] == 200
    await asyncio.sleep(1.1)
    status, raw = await post(url, headers=bearer, json=chat_body())
    assert status == 401 and orjson.loads(raw)["error"]["code"] == "401"


# -- the v1 API through the plain OpenAI client --------------------------------------------------

async def test_the_v1_api_through_the_openai_sdk(sim_url):
    client = openai.AsyncOpenAI(base_url=f"{sim_url}/openai/v1", api_key=AZURE_API_KEY, max_retries=0,
                                default_headers={"api-key": AZURE_API_KEY})
    completion = await client.chat.completions.create(model=DEPLOYMENT, messages=MESSAGES)
    assert completion.model == DEPLOYMENT and completion.model_extra["prompt_filter_results"]
    response = await client.responses.create(model=DEPLOYMENT, input="hi [sim:tokens=2]")
    assert response.usage.output_tokens == 2
    embeddings = await client.embeddings.create(model="text-embedding-3-large", input="one")
    assert len(embeddings.data[0].embedding) == 3072
    records = (await get_json(f"{sim_url}/_sim/requests"))["data"]
    assert [r["path"] for r in records] == ["/openai/v1/chat/completions", "/openai/v1/responses",
                                            "/openai/v1/embeddings"]
    assert all(r["outcome"] == "completed" and r["body"]["model"] for r in records)


async def test_the_v1_api_takes_the_key_as_a_bearer_and_ignores_an_api_version(sim_url):
    client = openai.AsyncOpenAI(base_url=f"{sim_url}/openai/v1", api_key=AZURE_API_KEY, max_retries=0,
                                default_query={"api-version": "preview"})
    completion = await client.chat.completions.create(model=DEPLOYMENT, messages=MESSAGES)
    assert completion.choices[0].message.content == "the quick brown "
