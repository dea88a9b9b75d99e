"""Each charge at the tier its provider reports it served (issue 38): OpenAI's flex and priority
(the served tier, not the one asked for), a long prompt's tier, Anthropic's one-hour cache writes;
the tier and the price version recorded with the charge and shown in the request log."""

from pathlib import Path

import pytest

from tests.gateway.prices.support import HAIKU_PRICES, MINI_PRICES, charge_of, tiered_document, usd_nano, \
    with_catalogue, write_catalogue
from tests.support import single_attempt

LONG = " ".join(["word"] * 80)  # past gpt-4o-mini's 60-token tier in this catalogue


@pytest.fixture
async def tiered(make_gateway, config, tmp_path: Path):
    path = write_catalogue(tmp_path / "tiered.json", tiered_document())
    return await make_gateway(single_attempt(with_catalogue(config, path)))


async def chat(gateway, key: str, text: str, **extra) -> tuple[str, dict]:
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": text}], **extra}
    async with gateway.client.post("/v1/chat/completions", json=body,
                                   headers={"Authorization": f"Bearer {key}"}) as response:
        assert response.status == 200, await response.text()
        return response.headers["X-Request-Id"], await response.json()


def tokens(usage: dict) -> dict[str, int]:
    return {"plain": usage["prompt_tokens"], "completion": usage["completion_tokens"]}


@pytest.mark.parametrize(("asked", "directive", "served"), [
    ("flex", "", "flex"),
    ("priority", "", "priority"),
    ("flex", "[sim:served_tier=priority]", "priority"),  # asked flex, served priority: billed priority
    ("priority", "[sim:served_tier=default]", "standard"),  # capacity full: served (and billed) standard
])
async def test_openai_is_charged_at_the_tier_it_reports_it_served(tiered, asked, directive, served):
    org = await tiered.new_org()
    request_id, answer = await chat(tiered, org["api_key"], f"hello {directive}", service_tier=asked)
    charge = await charge_of(tiered, request_id)
    prices = MINI_PRICES["service_tiers"].get(served, MINI_PRICES)
    assert charge.priced is not None and charge.priced.tier == served
    assert charge.cost_usd_nano == usd_nano(tokens(answer["usage"]), {**MINI_PRICES, **prices})
    assert answer["service_tier"] == ("default" if served == "standard" else served)


async def test_a_prompt_past_the_threshold_is_charged_the_long_context_tier(tiered):
    org = await tiered.new_org()
    short_id, short = await chat(tiered, org["api_key"], "a short prompt")
    long_id, long = await chat(tiered, org["api_key"], LONG)
    assert short["usage"]["prompt_tokens"] <= 60 < long["usage"]["prompt_tokens"]
    short_charge, long_charge = await charge_of(tiered, short_id), await charge_of(tiered, long_id)
    assert short_charge.priced.tier == "standard" and long_charge.priced.tier == "long_context_60"
    assert short_charge.cost_usd_nano == usd_nano(tokens(short["usage"]), MINI_PRICES)
    long_prices = {**MINI_PRICES, **MINI_PRICES["tiers"][0]}
    assert long_charge.cost_usd_nano == usd_nano(tokens(long["usage"]), long_prices)


async def test_anthropic_one_hour_cache_writes_cost_their_own_price(tiered):
    org = await tiered.new_org()
    body = {"model": "claude-haiku-4-5", "max_tokens": 50, "messages": [{"role": "user", "content":
            "cache this please " + " ".join(["context"] * 60) + " [sim:cache_write=10] [sim:cache_write_1h=30]"
            " [sim:cache_read=5]"}]}
    async with tiered.client.post("/v1/messages", json=body, headers={"x-api-key": org["api_key"]}) as response:
        assert response.status == 200, await response.text()
        request_id, answer = response.headers["X-Request-Id"], await response.json()
    usage = answer["usage"]
    assert usage["cache_creation"] == {"ephemeral_5m_input_tokens": 10, "ephemeral_1h_input_tokens": 30}
    charge = await charge_of(tiered, request_id)
    assert (charge.priced.cache_write_tokens, charge.priced.cache_write_1h_tokens, charge.priced.cached_tokens) == (
        10, 30, 5)
    spent = {"plain": usage["input_tokens"], "read": 5, "write": 10, "write_1h": 30,
             "completion": usage["output_tokens"]}
    assert charge.cost_usd_nano == usd_nano(spent, HAIKU_PRICES)
    # at the five-minute rate (LiteLLM #36762) it would have cost less
    assert charge.cost_usd_nano > usd_nano({**spent, "write": 40, "write_1h": 0}, HAIKU_PRICES)


async def test_the_log_names_each_charges_price_version_and_tier(tiered):
    org = await tiered.new_org()
    async with tiered.client.get("/v1/models") as response:
        version = (await response.json())["price_version"]
    request_id, _ = await chat(tiered, org["api_key"], "hello [sim:served_tier=flex]", service_tier="flex")
    headers = {"Authorization": f"Bearer {org['api_key']}"}
    async with tiered.client.get(f"/v1/logs/{request_id}", headers=headers) as response:
        entry = await response.json()
    assert (entry["price_version"], entry["price_tier"]) == (version, "flex")
    async with tiered.client.get("/v1/logs", headers=headers) as response:
        [listed] = (await response.json())["data"]
    assert (listed["price_version"], listed["price_tier"]) == (version, "flex")
    assert (await charge_of(tiered, request_id)).priced.version == version
