"""The price tiers as rules, without HTTP (issue 38): which tier a request is charged at, that the
charge is exactly its tokens at that tier's prices, that a hold covers the dearest tier, and that a
catalogue's tiers and dates are validated, a file without them billing as before."""

import json
from datetime import UTC, datetime
from decimal import Decimal
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.billing import ceilings
from gateway.billing.pricing import model_cost
from gateway.catalogue import Catalogue, CatalogueError
from gateway.config import Config
from gateway.providers.usage import Usage
from tests.gateway.prices.support import HAIKU_PRICES, MINI_PRICES, tiered_document, usd_nano

CATALOGUE = Catalogue.parse(json.dumps(tiered_document()).encode(), "tiered")
MINI, HAIKU = CATALOGUE.resolve("gpt-4o-mini"), CATALOGUE.resolve("claude-haiku-4-5")
SERVICES = SimpleNamespace(config=Config())
RATE = Decimal("84.5")
SERVED = st.sampled_from(["", "flex", "priority", "scale", "batch"])


def expected_tier(prompt_tokens: int, served: str) -> tuple[str, dict]:
    """The tier gpt-4o-mini's prices say a request is charged at, and its prices, as a reader would."""
    if served in MINI_PRICES["service_tiers"]:
        return served, {**MINI_PRICES, **MINI_PRICES["service_tiers"][served]}
    if prompt_tokens > 60:
        return "long_context_60", {**MINI_PRICES, **MINI_PRICES["tiers"][0]}
    return "standard", MINI_PRICES


@st.composite
def usages(draw, served=SERVED) -> Usage:
    prompt = draw(st.integers(0, 400_000))
    read = draw(st.integers(0, prompt))
    write = draw(st.integers(0, prompt - read))
    write_1h = draw(st.integers(0, prompt - read - write))
    return Usage(prompt, draw(st.integers(0, 100_000)), read, write, write_1h, draw(served))


@settings(max_examples=300, deadline=None)
@given(usages())
def test_a_charge_is_exactly_its_tokens_at_the_tier_served(usage):
    cost = model_cost(MINI.prices, usage, RATE)
    tier, prices = expected_tier(usage.prompt_tokens, usage.service_tier)
    plain = usage.prompt_tokens - usage.cached_prompt_tokens - usage.cache_write_tokens - usage.cache_write_1h_tokens
    spent = {"plain": plain, "read": usage.cached_prompt_tokens, "write": usage.cache_write_tokens,
             "write_1h": usage.cache_write_1h_tokens, "completion": usage.completion_tokens}
    # gpt-4o-mini states no cache-write price: a write costs the prompt price of its tier
    assert cost.usd_total_nano == usd_nano(spent, {"input_cache_write": prices["prompt"], **prices})
    assert cost.priced.tier == tier
    assert cost.priced.version == CATALOGUE.version


@settings(max_examples=300, deadline=None)
@given(usages(), st.sampled_from([MINI, HAIKU]))
def test_a_hold_covers_the_charge_at_whatever_tier_is_served(usage, model):
    """The hold of a request (its prompt unseen, its output allowed) is at least its charge, in any
    tier it may be served at (a long prompt's, the service tier it asked for), however its prompt
    turns out to split between plain tokens and the cache."""
    held = ceilings.tokens(SERVICES, model, usage.prompt_tokens, usage.completion_tokens, asked=usage.service_tier)
    assert held >= model_cost(model.prices, usage, SERVICES.config.billing.usd_to_inr).inr_nano


def test_a_one_hour_write_is_priced_apart_from_a_five_minute_one():
    usage = Usage(100, 0, 0, 40, 60)
    cost = model_cost(HAIKU.prices, usage, RATE)
    assert cost.usd_total_nano == usd_nano({"write": 40, "write_1h": 60}, HAIKU_PRICES)
    assert HAIKU.prices.ceiling(100).cache_write_1h_usd == "0.000002"


def test_batch_prices_apply_only_to_a_batch():
    document = tiered_document(mini={**MINI_PRICES, "batch_prompt": "0.000000075", "batch_completion": "0.0000003"})
    prices = Catalogue.parse(json.dumps(document).encode(), "batch").resolve("gpt-4o-mini").prices
    assert prices.tier(10).tier == "standard" and prices.tier(10, batch=True).tier == "batch"
    assert prices.tier(10, batch=True).prompt_usd == "0.000000075"
    assert prices.tier(10, "flex", batch=True).tier == "batch"  # a batch is billed as one, whatever the tier


def test_a_file_without_the_new_fields_bills_as_before():
    shipped = Catalogue.load().resolve("gpt-4o-realtime-preview").prices
    assert shipped.long_context == () and not shipped.service_tiers and shipped.batch is None
    assert shipped.tier(10**6, "priority") is shipped.per_token  # an unpriced tier: the standard prices


def test_every_version_is_the_hash_of_its_prices():
    assert CATALOGUE.version == Catalogue.parse(json.dumps(tiered_document()).encode(), "again").version
    cheaper = tiered_document(mini={**MINI_PRICES, "prompt": "0.00000014"})
    assert Catalogue.parse(json.dumps(cheaper).encode(), "cheaper").version != CATALOGUE.version
    described = tiered_document()
    described["data"][0]["description"] = "not a price"
    assert Catalogue.parse(json.dumps(described).encode(), "described").version == CATALOGUE.version


@pytest.mark.parametrize(("pricing", "reason"), [
    ({"tiers": [{"above_prompt_tokens": 100, "prompt": "1"}, {"above_prompt_tokens": 50, "prompt": "2"}]},
     "must rise strictly"),
    ({"tiers": [{"above_prompt_tokens": 0, "prompt": "1"}]}, "above_prompt_tokens"),
    ({"tiers": [{"above_prompt_tokens": 10, "prompt": "-1"}]}, "non-negative"),
    ({"service_tiers": {"Priority!": {"prompt": "1"}}}, "not a service tier name"),
    ({"service_tiers": {"standard": {"prompt": "1"}}}, "not a service tier name"),
    ({"service_tiers": {"flex": {"prompt": "cheap"}}}, "not a decimal"),
    ({"input_cache_write_1h": "NaN"}, "finite"),
    ({"effective_to": "2026-01-01T00:00:00Z"}, "only a price_history entry ends"),
    ({"effective_from": "2026-06-01T00:00:00Z", "price_history": [{**MINI_PRICES}]}, "effective_from before"),
    ({"effective_from": "2026-06-01T00:00:00Z", "price_history": [
        {**MINI_PRICES, "effective_from": "2026-01-01T00:00:00Z", "effective_to": "2026-07-01T00:00:00Z"}]},
     "must end by"),
    ({"effective_from": "2026-06-01T00:00:00Z", "price_history": [
        {**MINI_PRICES, "effective_from": "2026-01-01T00:00:00Z", "effective_to": "2026-04-01T00:00:00Z"},
        {**MINI_PRICES, "effective_from": "2026-03-01T00:00:00Z", "effective_to": "2026-05-01T00:00:00Z"}]},
     "overlap"),
    ({"effective_from": "2026-06-01T00:00:00"}, "timezone"),
    ({"effective_from": "June"}, "datetime"),
    ({"flex": "1"}, "unknown field"),
])
def test_a_catalogue_whose_tiers_or_dates_are_wrong_is_refused_naming_the_field(pricing, reason):
    document = tiered_document(mini={**MINI_PRICES, **pricing})
    with pytest.raises(CatalogueError, match="gpt-4o-mini") as raised:
        Catalogue.parse(json.dumps(document).encode(), "wrong")
    assert reason.lower() in str(raised.value).lower()


def test_a_price_not_yet_in_force_without_the_price_before_it_is_refused():
    document = tiered_document(mini={**MINI_PRICES, "effective_from": "2999-01-01T00:00:00Z"})
    with pytest.raises(CatalogueError, match="no price is in force"):
        Catalogue.parse(json.dumps(document).encode(), "future")


async def test_a_replica_keeps_its_prices_when_the_published_catalogue_names_a_provider_it_lacks(tmp_path):
    """Another replica's file, naming a provider this one has no [providers.<id>] for: refused here,
    logged, and the catalogue in force keeps serving."""
    import msgspec

    from gateway.catalogue.live import LiveCatalogue
    from gateway.catalogue.versions import schedule
    from ledger.backends import recorder_for
    from ledger.events import CatalogueSwitched
    from ledger.prices import Switched

    now = 1_800_000_000_000_000
    live = LiveCatalogue(CATALOGUE, {"openai", "anthropic", "google"}, clock=lambda: now)
    recorder = recorder_for(f"sqlite:///{tmp_path}/ledger.db")
    await recorder.open()
    await live.load(recorder)  # nothing recorded yet
    await recorder.close()
    document = tiered_document(mini={**MINI_PRICES, "prompt": "0.00000099"})
    content = json.dumps(document).encode()
    made = schedule(Catalogue.parse(content, "elsewhere"), datetime.fromtimestamp(now / 1e6, UTC))
    event = CatalogueSwitched(sha256="x", switches=tuple(s for s, _ in made), catalogue=msgspec.Raw(content))
    live.take(Switched(position=7, version=1, recorded_at_us=now, event=event))
    assert live.now() is CATALOGUE  # bedrock, vertex, azure ... are not configured here
    assert live.timeline.at(now).version == made[0][0].version  # the ledger's word is still recorded


def test_only_a_request_asking_for_a_dearer_service_tier_holds_at_its_prices():
    document = tiered_document(mini={**MINI_PRICES, "tiers": []})  # no long context: standard is dearest
    mini = Catalogue.parse(json.dumps(document).encode(), "untiered").resolve("gpt-4o-mini")
    standard = ceilings.tokens(SERVICES, mini, 1_000, 1_000)
    assert ceilings.tokens(SERVICES, mini, 1_000, 1_000, asked="flex") == standard  # flex is cheaper
    assert ceilings.tokens(SERVICES, mini, 1_000, 1_000, asked="priority") > standard
    assert ceilings.tokens(SERVICES, mini, 1_000, 1_000, asked=["priority"]) == standard  # not a tier's name


def test_a_prompt_that_cannot_pass_a_threshold_is_not_held_at_the_long_context_prices():
    short = ceilings.tokens(SERVICES, MINI, 50, 1_000)
    assert short == model_cost(MINI.prices, Usage(50, 1_000, cache_write_1h_tokens=50),
                               SERVICES.config.billing.usd_to_inr).inr_nano  # standard prices
    assert ceilings.tokens(SERVICES, MINI, 61, 1_000) > ceilings.tokens(SERVICES, MINI, 60, 1_000) + 1_000
