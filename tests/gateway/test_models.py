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
