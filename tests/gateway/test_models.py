"""GET /v1/models over HTTP: public, every record complete, filters by query parameter."""

import pytest


async def _ids(gateway, query: str = "") -> set[str]:
    response = await gateway.client.get(f"/v1/models{query}")
    assert response.status == 200
    return {record["id"] for record in (await response.json())["data"]}


async def test_models_need_no_key_and_list_every_required_model(gateway):
    ids = await _ids(gateway)
    assert {"gpt-4o-mini", "gpt-4o", "text-embedding-3-small", "text-embedding-3-large", "tts-1",
            "whisper-1", "claude-haiku-4-5", "claude-sonnet-4-5", "gemini-2.5-flash",
            "tune-3-clip-preview", "tune-3-pro-preview"} <= ids


async def test_music_prices_are_flat_per_generation(gateway):
    records = {r["id"]: r for r in (await (await gateway.client.get("/v1/models")).json())["data"]}
    assert records["tune-3-clip-preview"]["pricing"]["audio_music_per_generation"] == "0.05"
    assert records["tune-3-pro-preview"]["pricing"]["audio_music_per_generation"] == "0.08"
    assert records["tune-3-pro-preview"]["providers"][0]["providerId"] == "google"


@pytest.mark.parametrize(("query", "deprecated_listed"), [
    ("", False), ("?include_deactivated=true", True), ("?include_deactivated=1", True),
    ("?include_deactivated=true&exclude_deprecated=true", False), ("?include_deactivated=false", False),
])
async def test_deactivated_and_deprecated_filters(gateway, query, deprecated_listed):
    assert ("gpt-3.5-turbo-0613" in await _ids(gateway, query)) is deprecated_listed


# -- OpenAI's fields, one model by name, Anthropic's shape --------------------------------------

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")


pytestmark = pytest.mark.usefixtures("no_anthropic_env")


async def test_list_entries_carry_object_and_owned_by_beside_the_spec_fields(gateway):
    body = await (await gateway.client.get("/v1/models")).json()
    assert body["object"] == "list"
    records = {r["id"]: r for r in body["data"]}
    assert records["claude-haiku-4-5"]["object"] == "model"
    assert records["claude-haiku-4-5"]["owned_by"] == "anthropic"
    assert records["gpt-4o"]["owned_by"] == "openai" and records["gpt-4o"]["pricing"]["prompt"] == "0.0000025"
    assert "type" not in records["gpt-4o"]  # Anthropic's fields only for Anthropic's client


async def test_openai_sdk_retrieves_a_model_by_id_alias_and_provider_form_without_a_key(gateway):
    client = openai.AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key="unused", max_retries=0)
    for name in ("claude-haiku-4-5", "claude-haiku-4-5-20251001", "anthropic/claude-haiku-4-5"):
        model = await client.models.retrieve(name)
        assert (model.id, model.object, model.owned_by) == ("claude-haiku-4-5", "model", "anthropic")
        assert model.created == 1760486400 and model.model_extra["kind"] == "chat"


async def test_an_unknown_model_is_a_404_in_the_error_body(gateway):
    client = openai.AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key="unused", max_retries=0)
    with pytest.raises(openai.NotFoundError) as caught:
        await client.models.retrieve("gpt-17")
    assert caught.value.body["type"] == "not_found" and "gpt-17" in caught.value.body["message"]
    response = await gateway.client.get("/v1/models/openai/claude-haiku-4-5")  # not served by that provider
    assert response.status == 404 and (await response.json())["error"]["param"] == "model"


async def test_a_deactivated_model_is_still_retrieved_by_id(gateway):
    response = await gateway.client.get("/v1/models/gpt-3.5-turbo-0613")
    assert response.status == 200 and (await response.json())["deactivated_at"] == "2024-09-13T00:00:00Z"


@pytest.fixture
def claude_sdk(gateway):
    return anthropic.AsyncAnthropic(base_url=gateway.url, api_key="unused", max_retries=0)


async def test_anthropic_sdk_lists_models_with_its_own_fields(claude_sdk):
    models = [model async for model in claude_sdk.models.list()]
    by_id = {model.id: model for model in models}
    haiku = by_id["claude-haiku-4-5"]
    assert (haiku.type, haiku.display_name, haiku.lifecycle) == ("model", "Anthropic: Claude Haiku 4.5", "active")
    assert haiku.created_at.timestamp() == 1760486400 and haiku.max_input_tokens == 200000
    assert "gpt-3.5-turbo-0613" not in by_id and "tune-3-pro-preview" in by_id
    assert haiku.model_extra["pricing"]["prompt"] == "0.000001"  # the spec's fields stay


async def test_anthropic_sdk_pages_through_the_list(claude_sdk, gateway):
    every = [model.id for model in (await claude_sdk.models.list(limit=100)).data]
    first = await claude_sdk.models.list(limit=3)
    assert [m.id for m in first.data] == every[:3] and first.has_more and first.last_id == every[2]
    paged = [model.id async for model in claude_sdk.models.list(limit=3)]  # the SDK follows after_id
    assert paged == every
    before = await claude_sdk.models.list(before_id=every[4], limit=2)
    assert [m.id for m in before.data] == every[2:4] and before.has_more


async def test_anthropic_sdk_retrieves_one_model_and_a_retired_one(claude_sdk):
    model = await claude_sdk.models.retrieve("claude-sonnet-4-5-20250929")
    assert (model.id, model.type, model.display_name) == ("claude-sonnet-4-5", "model", "Anthropic: Claude Sonnet 4.5")
    retired = await claude_sdk.models.retrieve("gpt-3.5-turbo-0613")
    assert retired.lifecycle == "retired" and retired.retires_at is not None
    with pytest.raises(anthropic.NotFoundError):
        await claude_sdk.models.retrieve("claude-9")


async def test_a_cursor_that_is_not_listed_is_a_400(gateway):
    response = await gateway.client.get("/v1/models?after_id=nope", headers={"anthropic-version": "2023-06-01"})
    assert response.status == 400 and (await response.json())["error"]["param"] == "after_id"
