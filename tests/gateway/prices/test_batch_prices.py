"""Batch prices as rules, without HTTP (issue 39): a line of a provider's batch is charged exactly
its tokens at the batch tier (the catalogue's batch_prompt/batch_completion, else every standard
price halved, cache reads and writes alike), whatever tier the provider reports; its hold is
never below its charge; and the offline export check (ledger.price_check) agrees."""

import json
from decimal import Decimal
from types import SimpleNamespace

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.billing import ceilings
from gateway.billing.pricing import model_cost
from gateway.catalogue import Catalogue
from gateway.config import Config
from ledger.events import RequestCompleted
from ledger.price_check import _tier_problem
from tests.gateway.prices.support import HAIKU_PRICES, tiered_document, usd_nano
from tests.gateway.prices.test_pricing_rules import usages

SERVICES = SimpleNamespace(config=Config())
RATE = Decimal("84.5")
STATED = {"batch_prompt": "0.0000005", "batch_completion": "0.0000025"}
PRICE_FIELDS = ("prompt", "completion", "input_cache_read", "input_cache_write", "input_cache_write_1h")


def haiku(stated: bool):
    pricing = {**HAIKU_PRICES, **(STATED if stated else {})}
    document = tiered_document(haiku=pricing)
    return pricing, Catalogue.parse(json.dumps(document).encode(), "batch").resolve("claude-haiku-4-5")


def batch_tier(pricing: dict) -> dict:
    """The batch tier's prices as a reader of the issue computes them."""
    if "batch_prompt" in pricing:
        return {**pricing, "prompt": pricing["batch_prompt"], "completion": pricing["batch_completion"]}
    return {**pricing, **{field: str(Decimal(pricing[field]) / 2) for field in PRICE_FIELDS if field in pricing}}


@settings(max_examples=300, deadline=None)
@given(usages(), st.booleans())
def test_a_batch_line_is_charged_its_tokens_at_the_batch_tier(usage, stated):
    pricing, model = haiku(stated)
    cost = model_cost(model.prices.batched(), usage, RATE)
    plain = usage.prompt_tokens - usage.cached_prompt_tokens - usage.cache_write_tokens - usage.cache_write_1h_tokens
    spent = {"plain": plain, "read": usage.cached_prompt_tokens, "write": usage.cache_write_tokens,
             "write_1h": usage.cache_write_1h_tokens, "completion": usage.completion_tokens}
    assert cost.usd_total_nano == usd_nano(spent, batch_tier(pricing))
    assert cost.priced.tier == "batch"
    held = ceilings.tokens(SERVICES, msgspec.structs.replace(model, prices=model.prices.batched()),
                           usage.prompt_tokens, usage.completion_tokens)
    assert held >= model_cost(model.prices.batched(), usage, SERVICES.config.billing.usd_to_inr).inr_nano
    event = RequestCompleted(request_id="r", key_id="k", route="/v1/messages", model="claude-haiku-4-5",
                             provider="anthropic", status=200, prompt_tokens=usage.prompt_tokens,
                             completion_tokens=usage.completion_tokens, priced=cost.priced)
    assert _tier_problem(event.priced, event.prompt_tokens, pricing) is None


def test_the_batch_tier_is_half_only_where_none_is_stated():
    _, halved = haiku(False)
    assert halved.prices.batched().per_token.prompt_usd == "0.0000005"
    assert halved.prices.batched().per_token.cache_write_1h_usd == "0.000001"
    _, stated = haiku(True)
    assert stated.prices.batched().per_token.completion_usd == "0.0000025"
    assert stated.prices.tier(10).tier == "standard"  # a single request is never charged the batch tier
