"""Tests for gateway.catalogue: the shipped file, resolution, filters and load errors."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import orjson
import pytest

from gateway.catalogue import SHIPPED_PATH, Catalogue, CatalogueError, UnknownModel

STR_LIST = "str_list"
DATE_OR_NULL = "date_or_null"

RECORD_FIELDS = {
    "id": str, "name": str, "aliases": STR_LIST, "created": int, "description": str,
    "family": str, "kind": str, "architecture": dict, "top_provider": dict, "providers": list,
    "pricing": dict, "context_length": int, "per_request_limits": dict,
    "supported_parameters": STR_LIST, "json_output": bool, "structured_outputs": bool,
    "free": bool, "deprecated_at": DATE_OR_NULL, "deactivated_at": DATE_OR_NULL, "stability": str,
    "object": str, "owned_by": str,  # OpenAI's, beside the spec's
}
RECORD_PRICES = (
    "prompt", "completion", "image", "request", "input_cache_read", "input_cache_write",
    "web_search", "internal_reasoning", "video_per_second", "audio_music_per_generation",
    "audio_per_minute",
)
PROVIDER_FIELDS = {
    "providerId": str, "modelName": str, "pricing": dict, "streaming": bool, "vision": bool,
    "documents": bool, "cancellation": bool, "tools": bool, "parallelToolCalls": bool,
    "reasoning": bool, "stability": str,
}
PROVIDER_PRICES = ("prompt", "completion", "image", "audio_music_per_generation")
# optional: the model's apply without them (tiers and batch prices: the standard ones)
PROVIDER_OPTIONAL_PRICES = ("input_cache_read", "input_cache_write", "input_cache_write_1h", "batch_prompt",
                            "batch_completion", "tiers", "service_tiers")
KINDS = {"chat", "embedding", "speech", "transcription", "music", "realtime", "completion"}

# model id -> (family, kind, context_length, {record pricing field: exact string})
REQUIRED = {
    "gpt-4o-mini": ("openai", "chat", 128000,
                    {"prompt": "0.00000015", "completion": "0.0000006", "input_cache_read": "0.000000075"}),
    "gpt-4o": ("openai", "chat", 128000,
               {"prompt": "0.0000025", "completion": "0.00001", "input_cache_read": "0.00000125"}),
    "text-embedding-3-small": ("openai", "embedding", 8191, {"prompt": "0.00000002"}),
    "text-embedding-3-large": ("openai", "embedding", 8191, {"prompt": "0.00000013"}),
    "tts-1": ("openai", "speech", None, {"prompt": "0.000015"}),
    "whisper-1": ("openai", "transcription", None, {"audio_per_minute": "0.006"}),
    "gpt-4o-realtime-preview": ("openai", "realtime", 128000,
                                {"prompt": "0.000005", "completion": "0.00002", "input_cache_read": "0.0000025"}),
    "claude-haiku-4-5": ("anthropic", "chat", 200000,
                         {"prompt": "0.000001", "completion": "0.000005",
                          "input_cache_read": "0.0000001", "input_cache_write": "0.00000125"}),
    "claude-sonnet-4-5": ("anthropic", "chat", 200000,
                          {"prompt": "0.000003", "completion": "0.000015",
                           "input_cache_read": "0.0000003", "input_cache_write": "0.00000375"}),
    "gpt-3.5-turbo-instruct": ("openai", "completion", 4096, {"prompt": "0.0000015", "completion": "0.000002"}),
    "gemini-2.5-flash": ("google", "chat", 1048576,
                         {"prompt": "0.0000003", "completion": "0.0000025", "input_cache_read": "0.00000003"}),
    "tune-3-clip-preview": ("google", "music", None, {"audio_music_per_generation": "0.05"}),
    "tune-3-pro-preview": ("google", "music", None, {"audio_music_per_generation": "0.08"}),
}


@pytest.fixture(scope="module")
def catalogue() -> Catalogue:
    return Catalogue.load()


def body(catalogue: Catalogue, **filters) -> dict[str, dict]:
    """Decode models_body() as a client would and index the records by id."""
    decoded = orjson.loads(catalogue.models_body(**filters))
    assert set(decoded) == {"object", "price_version", "data"} and decoded["object"] == "list"
    assert decoded["price_version"] == catalogue.version
    return {record["id"]: record for record in decoded["data"]}


def assert_type(value, expected, where: str) -> None:
    if expected == STR_LIST:
        assert isinstance(value, list) and all(isinstance(v, str) for v in value), where
    elif expected == DATE_OR_NULL:
        assert value is None or datetime.fromisoformat(value).tzinfo is not None, where
    elif expected is int:  # bool is an int subclass in Python; JSON keeps them apart
        assert isinstance(value, int) and not isinstance(value, bool), where
    else:
        assert isinstance(value, expected), where


def assert_price(value, where: str) -> None:
    assert isinstance(value, str), where
    price = Decimal(value)
    assert price.is_finite() and price >= 0, where


def stated_prices(pricing: dict):
    """(field, price) of every price a provider entry states, its tiers' included."""
    for field, value in pricing.items():
        if field == "tiers":
            for tier in value:
                assert isinstance(tier["above_prompt_tokens"], int), field
                yield from ((f"tiers.{name}", price) for name, price in tier.items() if name != "above_prompt_tokens")
        elif field == "service_tiers":
            yield from ((f"{field}.{tier}.{name}", price) for tier, prices in value.items()
                        for name, price in prices.items())
        else:
            yield field, value


def test_every_record_has_every_spec_field_with_the_right_json_type(catalogue):
    records = body(catalogue, include_deactivated=True)
    assert records
    for model_id, record in records.items():
        assert set(record) == set(RECORD_FIELDS), model_id
        for field, expected in RECORD_FIELDS.items():
            assert_type(record[field], expected, f"{model_id}.{field}")
        assert record["kind"] in KINDS
        arch = record["architecture"]
        assert set(arch) == {"input_modalities", "output_modalities", "tokenizer"}
        assert_type(arch["input_modalities"], STR_LIST, model_id)
        assert_type(arch["output_modalities"], STR_LIST, model_id)
        assert isinstance(arch["tokenizer"], str)
        assert isinstance(record["top_provider"]["is_moderated"], bool)
        assert set(record["pricing"]) == set(RECORD_PRICES), model_id
        for field in RECORD_PRICES:
            assert_price(record["pricing"][field], f"{model_id}.pricing.{field}")
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in record["per_request_limits"].items())
        assert record["providers"], model_id
        for entry in record["providers"]:
            assert set(entry) == set(PROVIDER_FIELDS), model_id
            for field, expected in PROVIDER_FIELDS.items():
                assert_type(entry[field], expected, f"{model_id}.providers.{field}")
            stated = set(entry["pricing"])
            assert set(PROVIDER_PRICES) <= stated <= {*PROVIDER_PRICES, *PROVIDER_OPTIONAL_PRICES}, model_id
            for field, price in stated_prices(entry["pricing"]):
                assert_price(price, f"{model_id}.providers.pricing.{field}")


@pytest.mark.parametrize("model_id", sorted(REQUIRED))
def test_required_model_present_with_exact_prices(catalogue, model_id):
    family, kind, context_length, prices = REQUIRED[model_id]
    record = body(catalogue)[model_id]
    assert (record["family"], record["kind"]) == (family, kind)
    if context_length is not None:
        assert record["context_length"] == context_length
    for field, text in prices.items():
        assert record["pricing"][field] == text, field
    for field, text in record["pricing"].items():
        if field not in prices:  # everything not listed is free
            assert Decimal(text) == 0, field
    assert record["providers"][0]["providerId"] == family


def test_resolved_prices_are_parsed_decimals(catalogue):
    mini = catalogue.resolve("gpt-4o-mini").prices
    assert mini.prompt == Decimal("0.15") / 1_000_000
    assert mini.completion == Decimal("0.60") / 1_000_000
    assert mini.input_cache_read == Decimal("0.075") / 1_000_000
    assert catalogue.resolve("whisper-1").prices.audio_per_minute == Decimal("0.006")
    assert catalogue.resolve("tts-1").prices.prompt == Decimal("15") / 1_000_000


def test_modalities_of_audio_models(catalogue):
    records = body(catalogue)
    assert records["tts-1"]["architecture"]["output_modalities"] == ["audio"]
    assert records["whisper-1"]["architecture"]["input_modalities"] == ["audio"]
    assert records["gpt-4o-mini"]["architecture"]["input_modalities"] == ["text", "image"]


def test_music_models_are_flat_priced_previews(catalogue):
    records = body(catalogue)
    for model_id, per_generation in (("tune-3-clip-preview", "0.05"), ("tune-3-pro-preview", "0.08")):
        record = records[model_id]
        assert record["kind"] == "music" and record["stability"] == "preview"
        assert record["architecture"]["output_modalities"] == ["audio"]
        assert record["providers"][0]["pricing"]["audio_music_per_generation"] == per_generation
        resolved = catalogue.resolve(model_id)
        assert resolved.kind == "music" and resolved.provider_id == "google"
        assert resolved.prices.per_generation == Decimal(per_generation)
        assert resolved.prices.prompt == resolved.prices.completion == 0
    assert records["tune-3-clip-preview"]["architecture"]["input_modalities"] == ["text"]
    assert records["tune-3-pro-preview"]["architecture"]["input_modalities"] == ["text", "image"]


@pytest.mark.parametrize("name", [
    "claude-haiku-4-5", "claude-haiku-4-5-20251001",
    "anthropic/claude-haiku-4-5", "anthropic/claude-haiku-4-5-20251001",
])
def test_resolve_bare_alias_and_provider_prefixed(catalogue, name):
    resolved = catalogue.resolve(name)
    assert resolved.model_id == "claude-haiku-4-5"
    assert resolved.provider_id == "anthropic"
    assert resolved.upstream_model == "claude-haiku-4-5-20251001"
    assert resolved.kind == "chat"
    assert resolved.provider is resolved.record.providers[0]


@pytest.mark.parametrize("name", ["openai/claude-haiku-4-5", "google/gpt-4o", "gpt-5-ultra", "", "openai/"])
def test_resolve_unknown_or_wrong_provider(catalogue, name):
    with pytest.raises(UnknownModel) as info:
        catalogue.resolve(name)
    assert repr(name) in str(info.value)


def test_default_listing_hides_deactivated(catalogue):
    ids = {record.id for record in catalogue.listing()}
    assert "gpt-3.5-turbo-0613" not in ids
    assert set(REQUIRED) <= ids
    assert "gpt-3.5-turbo-0613" not in body(catalogue)


def test_include_deactivated_shows_it_and_exclude_deprecated_hides_it(catalogue):
    record = body(catalogue, include_deactivated=True)["gpt-3.5-turbo-0613"]
    assert record["deprecated_at"] == "2024-06-13T00:00:00Z"
    assert record["deactivated_at"] == "2024-09-13T00:00:00Z"
    ids = {r.id for r in catalogue.listing(include_deactivated=True, exclude_deprecated=True)}
    assert "gpt-3.5-turbo-0613" not in ids and set(REQUIRED) <= ids


def test_now_is_respected(catalogue):
    def ids(now, **filters):
        return {r.id for r in catalogue.listing(now=now, **filters)}

    between = datetime(2024, 7, 1, tzinfo=UTC)  # deprecated but not yet deactivated
    assert "gpt-3.5-turbo-0613" in ids(between)
    assert "gpt-3.5-turbo-0613" not in ids(between, exclude_deprecated=True)
    assert "gpt-3.5-turbo-0613" not in ids(datetime(2024, 9, 13, tzinfo=UTC))  # the boundary counts
    assert "gpt-3.5-turbo-0613" in ids(datetime(2024, 1, 1))  # naive means UTC


def test_future_deactivation_waits_for_now(tmp_path):
    record = shipped_record("gpt-4o")
    record["deactivated_at"] = "2030-01-01T00:00:00Z"
    catalogue = Catalogue.load(write(tmp_path, [record]))
    assert [r.id for r in catalogue.listing()] == ["gpt-4o"]
    assert catalogue.listing(now=datetime(2031, 1, 1, tzinfo=UTC)) == []


# --- load errors ---------------------------------------------------------------------

def shipped_record(model_id: str) -> dict:
    """A fresh, mutable copy of one record from the shipped file."""
    data = orjson.loads(SHIPPED_PATH.read_bytes())
    return next(record for record in data["data"] if record["id"] == model_id)


def write(tmp_path: Path, records: list[dict]) -> Path:
    path = tmp_path / "catalogue.json"
    path.write_bytes(orjson.dumps({"data": records}))
    return path


def load_error(tmp_path: Path, records: list[dict]) -> str:
    with pytest.raises(CatalogueError) as info:
        Catalogue.load(write(tmp_path, records))
    return str(info.value)


@pytest.mark.parametrize("bad", ["-0.1", "-1e-9", "abc", "NaN", "sNaN", "-Infinity", "", "0.1 USD"])
def test_bad_record_price_names_model_and_field(tmp_path, bad):
    record = shipped_record("gpt-4o")
    record["pricing"]["completion"] = bad
    message = load_error(tmp_path, [shipped_record("gpt-4o-mini"), record])
    assert "gpt-4o'" in message and "pricing.completion" in message


def test_bad_provider_price_names_model_and_field(tmp_path):
    record = shipped_record("tune-3-pro-preview")
    record["providers"][0]["pricing"]["audio_music_per_generation"] = "-1"
    message = load_error(tmp_path, [record])
    assert "tune-3-pro-preview" in message and "audio_music_per_generation" in message


def test_price_of_wrong_json_type_names_model_and_field(tmp_path):
    record = shipped_record("whisper-1")
    record["pricing"]["audio_per_minute"] = 0.006
    message = load_error(tmp_path, [record])
    assert "whisper-1" in message and "audio_per_minute" in message


@pytest.mark.parametrize("path", [("context_length",), ("pricing", "prompt"), ("providers", 0, "modelName"),
                                  ("architecture", "tokenizer"), ("deprecated_at",)])
def test_missing_required_field_names_model_and_field(tmp_path, path):
    record = shipped_record("claude-sonnet-4-5")
    target = record
    for step in path[:-1]:
        target = target[step]
    del target[path[-1]]
    message = load_error(tmp_path, [record])
    assert "claude-sonnet-4-5" in message and str(path[-1]) in message


def test_other_malformed_files_are_rejected(tmp_path):
    naive = shipped_record("gpt-4o")
    naive["deprecated_at"] = "2024-01-01T00:00:00"
    assert "gpt-4o" in load_error(tmp_path, [naive])
    clash = shipped_record("gpt-4o-mini")
    clash["aliases"] = ["gpt-4o"]
    assert "gpt-4o" in load_error(tmp_path, [shipped_record("gpt-4o"), clash])
    unknown_kind = shipped_record("tts-1")
    unknown_kind["kind"] = "video"
    assert "kind" in load_error(tmp_path, [unknown_kind])
    (tmp_path / "broken.json").write_bytes(b"{not json")
    with pytest.raises(CatalogueError):
        Catalogue.load(tmp_path / "broken.json")


def test_a_saved_models_listing_loads_as_a_catalogue_file(catalogue, tmp_path):
    path = tmp_path / "saved.json"
    path.write_bytes(catalogue.models_body(include_deactivated=True))
    reloaded = Catalogue.load(path)
    assert reloaded.models_body(include_deactivated=True) == catalogue.models_body(include_deactivated=True)


def test_each_entry_names_its_owner_as_openai_lists_models(catalogue):
    records = body(catalogue)
    assert all((r["object"], r["owned_by"]) == ("model", r["family"]) for r in records.values())
    assert {r["owned_by"] for r in records.values()} >= {"openai", "anthropic", "google", "amazon", "cohere"}


@pytest.mark.parametrize(("text", "expected"), [("16384", 16384), ("²", None), ("١٢", None), ("", None),
                                                ("1" * 40, None), ("-1", None)])
def test_a_per_request_limit_is_read_only_in_ascii_digits(text, expected):
    import msgspec
    record = Catalogue.load().resolve("gpt-4o-mini").record
    odd = msgspec.structs.replace(record, per_request_limits={"max_completion_tokens": text})
    assert odd.limit("max_completion_tokens") == expected
