"""Every charge the gateway records can be computed again from its own event (issue 28): the
event the gateway writes for any usage, prices, rate, status and key holds what ledger.charges
needs, and any other cost or charge in it is called out (hypothesis, over every pricing path:
tokens with and without the prompt cache, audio minutes, a flat price per generation)."""

from decimal import Decimal

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from gateway.accounts.directory import Principal
from gateway.billing.charging import outcome, request_event
from gateway.billing.pricing import Cost, flat_cost, minutes_cost, model_cost
from gateway.catalogue import Catalogue, Prices
from gateway.providers.usage import Usage
from gateway.services import Caller
from ledger import charges
from ledger.events import RequestCompleted

CATALOGUE = Catalogue.load()
MODEL = CATALOGUE.resolve("gpt-4o-mini")
price = st.decimals(min_value=0, max_value=Decimal("0.01"), places=12, allow_nan=False)
rate = st.decimals(min_value=Decimal("0.01"), max_value=1000, places=6, allow_nan=False)


@st.composite
def usages(draw) -> Usage:
    prompt = draw(st.integers(0, 10**7))
    cached = draw(st.integers(0, prompt))
    written = draw(st.integers(0, prompt - cached))
    return Usage(prompt, draw(st.integers(0, 10**7)), cached, written)


@st.composite
def prices(draw) -> Prices:
    prompt, completion, read, write = (draw(price) for _ in range(4))
    return msgspec.structs.replace(MODEL.prices, prompt=prompt, completion=completion, input_cache_read=read,
                                   input_cache_write=write, per_generation=draw(price), audio_per_minute=draw(price),
                                   per_token=charges.per_token(prompt, completion, read or None, write or None))


@st.composite
def costs(draw) -> tuple[Usage, Cost]:
    usage, at, usd_to_inr = draw(usages()), draw(prices()), draw(rate)
    match draw(st.sampled_from(["tokens", "minutes", "flat"])):
        case "tokens":
            return usage, model_cost(at, usage, usd_to_inr)
        case "minutes":
            return Usage(), minutes_cost(at, draw(st.decimals(0, 10**5, places=3, allow_nan=False)), usd_to_inr)
    return Usage(), flat_cost(at, usd_to_inr)


def recorded(usage: Usage, cost: Cost, status: int, byok: bool) -> RequestCompleted:
    """The event the gateway records for such a request (gateway.billing.charging.request_event)."""
    caller = Caller(Principal("key_1", "org_1"), "req_1")
    return request_event(caller, outcome("/v1/chat/completions", MODEL, status, usage, cost, byok=byok))


@given(costs(), st.sampled_from([200, 499, 400, 429, 502]), st.booleans())
def test_every_recorded_charge_is_what_its_own_fields_make_it(priced, status, byok):
    event = recorded(*priced, status, byok)
    assert event.priced is not None and charges.misstated(event) is None
    assert event.charged_inr_nano == (event.cost_inr_nano if status in (200, 499) and not byok else 0)


@given(costs(), st.sampled_from(["cost_usd_nano", "cost_inr_nano", "charged_inr_nano"]), st.sampled_from([-1, 1]))
def test_any_other_cost_or_charge_is_called_out(priced, field, step):
    event = recorded(*priced, 200, False)
    assert charges.misstated(msgspec.structs.replace(event, **{field: getattr(event, field) + step})) is not None


@given(costs(), st.sampled_from(["prompt_tokens", "completion_tokens"]), st.integers(1, 1000))
def test_more_tokens_are_called_out_whenever_they_cost_more(priced, field, more):
    event = recorded(*priced, 200, False)
    changed = msgspec.structs.replace(event, **{field: getattr(event, field) + more})
    assert event.priced is not None
    costs_more = sum(charges.usd_nano(event.priced, changed.prompt_tokens, changed.completion_tokens)) != \
        event.cost_usd_nano
    assert (charges.misstated(changed) is not None) == costs_more


@given(costs())
def test_a_changed_price_or_rate_is_called_out_whenever_it_changes_the_cost(priced):
    usage, cost = priced
    event = recorded(usage, cost, 200, False)
    assert event.priced is not None
    for name in ("prompt_usd", "completion_usd", "cache_read_usd", "per_minute_usd", "flat_usd"):
        other = msgspec.structs.replace(event.priced, **{name: str(Decimal(getattr(event.priced, name)) + 1)})
        changed = msgspec.structs.replace(event, priced=other)
        if sum(charges.usd_nano(other, event.prompt_tokens, event.completion_tokens)) != event.cost_usd_nano:
            assert charges.misstated(changed) is not None
    doubled = msgspec.structs.replace(event, usd_to_inr=str(Decimal(event.usd_to_inr) * 2))
    at_double = charges.inr_nano(event.cost_usd_nano, Decimal(doubled.usd_to_inr))
    assert (charges.misstated(doubled) is None) == (at_double == event.cost_inr_nano)


def test_a_request_recorded_before_prices_were_is_held_to_its_rate_and_rule():
    legacy = RequestCompleted(request_id="r", key_id="k", route="/v1/chat/completions", model="m", provider="p",
                              status=200, cost_usd_nano=1_000, cost_inr_nano=84_000, charged_inr_nano=84_000,
                              usd_to_inr="84")
    assert charges.misstated(legacy) is None
    assert charges.misstated(msgspec.structs.replace(legacy, charged_inr_nano=0)) is None  # its own key, then
    assert charges.misstated(msgspec.structs.replace(legacy, charged_inr_nano=83_999)) is not None
    assert charges.misstated(msgspec.structs.replace(legacy, status=502)) is not None
    assert "not a finite number" in charges.misstated(msgspec.structs.replace(legacy, usd_to_inr="NaN"))
