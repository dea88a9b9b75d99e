"""`gateway catalogue add|check` (gateway.catalogue.commands): a catalogue priced from genai-prices
(gateway.catalogue.source), run as a user runs it; and the shipped catalogue equal to the source."""

import json
from decimal import Decimal
from pathlib import Path

import pytest
from genai_prices import Usage, calc_price

from gateway.catalogue import SHIPPED_PATH, Catalogue, comparison, source
from ledger import price_tiers
from tests.gateway.gateway_helpers import one_json_object, run_cli, write_config
from tests.support import auth

MILLION = Decimal(1_000_000)


def added(*args: str) -> dict:
    """`gateway catalogue add ARGS...`, which must succeed: the one JSON line it printed."""
    result = run_cli("catalogue", "add", *args)
    assert result.returncode == 0, result.stderr
    return one_json_object(result.stdout)


def check(path: Path | None = None) -> tuple[int, list[dict]]:
    """`gateway catalogue check [--file PATH]`: its exit status and the JSON lines it printed."""
    result = run_cli("catalogue", "check", *(("--file", str(path)) if path else ()))
    assert result.stderr == ""
    return result.returncode, [json.loads(line) for line in result.stdout.splitlines()]


def records(path: Path) -> dict[str, dict]:
    return {record["id"]: record for record in json.loads(path.read_text())["data"]}


def shipped(model_id: str) -> dict:
    return next(r for r in json.loads(SHIPPED_PATH.read_text())["data"] if r["id"] == model_id)


@pytest.fixture
def gemini_pro(tmp_path) -> Path:
    """A new catalogue file holding Gemini 2.5 Pro (a long-context tier) from the source."""
    path = tmp_path / "catalogue.json"
    written = added("google", "gemini-2.5-pro", "--file", str(path), "--context-length", "1048576")
    assert (written["action"], written["model"], written["context_length"]) == ("created", "gemini-2.5-pro", 1048576)
    return path


def test_add_writes_a_record_that_loads_with_the_sources_prices_and_long_context_tier(gemini_pro):
    prices = Catalogue.load(gemini_pro).resolve("google/gemini-2.5-pro").prices
    standard = source.find("google", "gemini-2.5-pro").model.get_prices(Catalogue.load(gemini_pro).at)
    assert prices.prompt == standard.input_mtok.base / MILLION
    assert prices.completion == standard.output_mtok.base / MILLION
    assert prices.input_cache_read == standard.cache_read_mtok.base / MILLION
    [(threshold, tier)] = prices.long_context
    assert threshold == standard.input_mtok.tiers[0].start == 200_000
    assert Decimal(tier.prompt_usd) == standard.input_mtok.tiers[0].price / MILLION
    assert Decimal(tier.completion_usd) == standard.output_mtok.tiers[0].price / MILLION


@pytest.mark.parametrize("prompt_tokens", [199_999, 200_000, 200_001, 900_000])
def test_a_long_context_tier_starts_where_genai_prices_starts_it(gemini_pro, prompt_tokens):
    """genai-prices prices every token at a tier once the prompt is MORE than its start, as
    `above_prompt_tokens` says: the same request costs the same by both."""
    prices = Catalogue.load(gemini_pro).resolve("gemini-2.5-pro").prices
    ours = prices.tier(prompt_tokens)
    theirs = calc_price(Usage(input_tokens=prompt_tokens, output_tokens=1000), "gemini-2.5-pro", provider_id="google")
    assert Decimal(ours.prompt_usd) * prompt_tokens + Decimal(ours.completion_usd) * 1000 == theirs.total_price
    assert (ours.tier == price_tiers.STANDARD) is (prompt_tokens <= 200_000)


def test_add_states_cache_prices_and_one_hour_writes_where_the_source_has_them(tmp_path):
    path = tmp_path / "catalogue.json"
    written = added("anthropic", "claude-haiku-4-5-20251001", "--file", str(path), "--id", "claude-haiku-4-5")
    assert written["pricing"] == {
        "prompt": "0.000001", "completion": "0.000005", "input_cache_read": "0.0000001",
        "input_cache_write": "0.00000125", "input_cache_write_1h": "0.000002", "image": "0",
        "audio_music_per_generation": "0", "batch_prompt": "0.0000005", "batch_completion": "0.0000025"}
    prices = Catalogue.load(path).resolve("claude-haiku-4-5").prices
    assert (prices.per_token.cache_write_1h_usd, prices.batch.prompt_usd) == ("0.000002", "0.0000005")
    usage = Usage(input_tokens=1000, cache_read_tokens=300, cache_write_tokens=200, output_tokens=50)
    theirs = calc_price(usage, "claude-haiku-4-5-20251001", provider_id="anthropic").total_price
    assert (500 * prices.prompt + 300 * prices.input_cache_read + 200 * prices.input_cache_write
            + 50 * prices.completion) == theirs


def test_add_to_an_existing_model_adds_or_reprices_its_entry_and_keeps_everything_else(tmp_path):
    gpt_4o, whisper = shipped("gpt-4o"), shipped("whisper-1")
    gpt_4o["providers"] = [entry for entry in gpt_4o["providers"] if entry["providerId"] == "openai"]
    gpt_4o["providers"][0]["pricing"]["prompt"] = "0.000009"  # a stale price the source corrects
    path = tmp_path / "catalogue.json"
    path.write_text(json.dumps({"data": [gpt_4o, whisper]}))
    assert added("azure", "gpt-4o", "--file", str(path))["action"] == "added"
    assert added("openai", "gpt-4o", "--file", str(path))["action"] == "replaced"
    after = records(path)
    assert list(after) == ["gpt-4o", "whisper-1"] and after["whisper-1"] == whisper
    assert [(e["providerId"], e["modelName"]) for e in after["gpt-4o"]["providers"]] == [
        ("openai", "gpt-4o"), ("azure", "gpt-4o")]
    openai, azure = after["gpt-4o"]["providers"]
    assert openai["pricing"] == source.entry_pricing("openai", "gpt-4o")
    assert {k: v for k, v in openai.items() if k != "pricing"} == {
        k: v for k, v in gpt_4o["providers"][0].items() if k != "pricing"}  # its capabilities stay
    assert azure["pricing"] == source.entry_pricing("azure", "gpt-4o")
    assert {k: v for k, v in after["gpt-4o"].items() if k != "providers"} == {
        k: v for k, v in gpt_4o.items() if k != "providers"}
    Catalogue.load(path)


def test_add_leaves_dated_prices_to_the_operator(tmp_path):
    gpt_4o = shipped("gpt-4o")
    gpt_4o["providers"][0]["pricing"]["effective_from"] = "2026-01-01T00:00:00Z"
    path = tmp_path / "catalogue.json"
    path.write_text(json.dumps({"data": [gpt_4o]}))
    before = path.read_text()
    result = run_cli("catalogue", "add", "openai", "gpt-4o", "--file", str(path))
    assert result.returncode == 1 and "dated prices" in result.stderr and path.read_text() == before


def test_check_passes_on_the_sources_prices_and_lists_each_price_that_differs(gemini_pro):
    assert check(gemini_pro)[0] == 0
    data = json.loads(gemini_pro.read_text())
    pricing = data["data"][0]["providers"][0]["pricing"]
    pricing["prompt"] = "0.0000012500"  # the same price, written otherwise
    pricing["tiers"][0]["completion"] = "0.000016"
    gemini_pro.write_text(json.dumps(data))
    status, lines = check(gemini_pro)
    assert status == 1
    assert [(line["model"], line["provider"], line["field"], line["catalogue"], line["source"])
            for line in lines if line.get("status") == "differs"] == [
        ("gemini-2.5-pro", "google", "tiers.above_200000.completion", "0.000016", "0.000015")]
    assert lines[-1]["ok"] is False and lines[-1]["differences"] == 1


def test_an_unknown_model_is_an_error_naming_it_and_writes_nothing(tmp_path):
    path = tmp_path / "catalogue.json"
    result = run_cli("catalogue", "add", "openai", "gpt-17", "--file", str(path))
    assert result.returncode == 1 and result.stdout == ""
    assert "'gpt-17'" in result.stderr and "genai-prices" in result.stderr
    assert not path.exists()
    unpriced = run_cli("catalogue", "add", "openai", "gpt-4o-mini-tts", "--file", str(path))
    assert unpriced.returncode == 1 and "per character" in unpriced.stderr


def test_add_needs_a_file_and_check_uses_the_configured_one(tmp_path, gemini_pro):
    refused = run_cli("catalogue", "add", "openai", "gpt-4o")
    assert refused.returncode == 1 and "--file" in refused.stderr
    cfg = write_config(tmp_path, f'[catalogue]\npath = "{gemini_pro}"\n')
    result = run_cli("catalogue", "check", "--config", str(cfg))
    assert result.returncode == 0 and json.loads(result.stdout.splitlines()[-1])["file"] == str(gemini_pro)


def test_the_shipped_catalogue_charges_what_the_source_says():
    """Every price of the shipped file is the source's; models the source does not know (the music
    models, Cohere's embeddings on Bedrock) are listed, and allowed."""
    status, lines = check()
    assert [line for line in lines if line.get("status") == "differs"] == []
    assert {line["model"] for line in lines if line.get("status") == "not in source"} == {
        "tune-3-clip-preview", "tune-3-pro-preview", "cohere-embed-english-v3"}
    assert status == 0 and lines[-1]["ok"] is True and lines[-1]["file"] == str(SHIPPED_PATH)


def test_prices_compare_as_charged():
    entry = {"prompt": "0.0000030", "completion": "0.000015", "input_cache_write_1h": "0"}
    theirs = {"prompt": "0.000003", "completion": "0.000015", "input_cache_read": "0.000003",
              "batch_prompt": "0.000003", "tiers": [{"above_prompt_tokens": 100, "completion": "0.000015"}]}
    assert comparison.differences(entry, {}, theirs) == []  # none stated is the standard price
    cached = comparison.differences(entry, {"input_cache_read": "0.0000003"}, theirs)  # the record's applies
    assert [(d.field, d.catalogue, d.source) for d in cached] == [  # in the standard tier and the one above 100
        ("input_cache_read", Decimal("0.0000003"), Decimal("0.000003")),
        ("tiers.above_100.input_cache_read", Decimal("0.0000003"), Decimal("0.000003"))]


@pytest.mark.parametrize("model", [
    "openai/gpt-4.1", "azure/gpt-4.1", "anthropic/claude-opus-4-5-20251101", "vertex/claude-opus-4-6",
    "bedrock/global.anthropic.claude-sonnet-4-6", "google/gemini-2.5-pro", "vertex/gemini-2.5-flash-lite",
    "groq/llama-3.3-70b-versatile", "openrouter/deepseek/deepseek-v3.2", "bedrock/us.amazon.nova-pro-v1:0"])
async def test_a_model_the_source_added_answers_through_each_provider(gateway, model):
    org = await gateway.new_org("1000")
    response = await gateway.client.post("/v1/chat/completions", headers=auth(org["api_key"]), json={
        "model": model, "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]})
    assert response.status == 200, await response.text()
    assert Decimal(response.headers["X-Gateway-Cost-INR"]) > 0
