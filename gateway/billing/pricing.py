"""What a request costs: tokens times catalogue prices in USD, converted to INR, exactly.

What is priced is a provider's checked usage report (gateway.providers.usage.Usage)."""

from decimal import Decimal

import msgspec

from gateway.catalogue import Prices
from gateway.jsonio import number
from gateway.providers.usage import Usage
from ledger import charges, price_tiers
from ledger.events import Priced
from ledger.money import format_amount, from_nano

# The response headers that state a delivered answer's cost, as `cost_body` does in the body.
COST_INR_HEADER, COST_USD_HEADER, RATE_HEADER = "X-Gateway-Cost-INR", "X-Gateway-Cost-USD", "X-Gateway-USD-INR-Rate"
CHARGED_INR_HEADER = "X-Gateway-Charged-INR"  # what the balance pays: the cost, or 0 on the org's own key


class Cost(msgspec.Struct, frozen=True):
    """Amounts in nano-units, so what is reported is exactly what is charged; `priced` is what
    they were computed from (ledger.charges), recorded with the request."""

    usd_input_nano: int
    usd_output_nano: int
    inr_nano: int
    rate: Decimal
    priced: Priced | None = None

    @property
    def usd_total_nano(self) -> int:
        return self.usd_input_nano + self.usd_output_nano


FREE = Cost(0, 0, 0, Decimal(0))
NO_USAGE = Usage()


def priced_cost(priced: Priced, usage: Usage, rate: Decimal) -> Cost:
    """What `usage` costs at the prices of `priced` (ledger.charges, the formula), INR at `rate`."""
    usd_in, usd_out = charges.usd_nano(priced, usage.prompt_tokens, usage.completion_tokens)
    return Cost(usd_in, usd_out, charges.inr_nano(usd_in + usd_out, rate), rate, priced)


def token_cost(usage: Usage, prompt_price: Decimal, completion_price: Decimal, rate: Decimal,
               cache_read_price: Decimal | None = None, cache_write_price: Decimal | None = None) -> Cost:
    """Cost of `usage` at per-token USD prices; INR is the exact USD total times `rate`.

    Prompt tokens read from the cache cost `cache_read_price`, those written to it
    `cache_write_price` (None: the prompt price), the rest the prompt price.
    """
    prices = charges.per_token(prompt_price, completion_price, cache_read_price, cache_write_price)
    return priced_cost(cached(prices, usage), usage, rate)


def cached(prices: Priced, usage: Usage) -> Priced:
    """`prices` with the prompt tokens `usage` read from and wrote to the provider's cache."""
    if not (usage.cached_prompt_tokens or usage.cache_write_tokens or usage.cache_write_1h_tokens):
        return prices
    return msgspec.structs.replace(prices, cached_tokens=usage.cached_prompt_tokens,
                                   cache_write_tokens=usage.cache_write_tokens,
                                   cache_write_1h_tokens=usage.cache_write_1h_tokens)


def model_cost(prices: Prices, usage: Usage, rate: Decimal, *, batch: bool = False) -> Cost:
    """What `usage` costs at a model's catalogue prices, in the tier it was served at
    (`Prices.tier`: the service tier its provider reported, a long prompt's tier, a batch's);
    prompt tokens read from (written to) the provider's cache cost that tier's cache prices."""
    served = prices.tier(usage.prompt_tokens, usage.service_tier, batch)
    return priced_cost(cached(served, usage), usage, rate)


def minutes_cost(prices: Prices, seconds: Decimal, rate: Decimal) -> Cost:
    """Audio `seconds` at the per-minute price."""
    priced = Priced(seconds=format_amount(seconds), per_minute_usd=format_amount(prices.audio_per_minute),
                    version=prices.version, tier=price_tiers.STANDARD)
    return priced_cost(priced, NO_USAGE, rate)


def flat_cost(prices: Prices, rate: Decimal) -> Cost:
    """The flat per-generation price."""
    priced = Priced(flat_usd=format_amount(prices.per_generation), version=prices.version, tier=price_tiers.STANDARD)
    return priced_cost(priced, NO_USAGE, rate)


def usage_body(usage: Usage, cost: Cost) -> dict:
    """The chat `usage` object of spec 2.5, plus the INR charged and the rate used."""
    tokens: dict[str, object] = {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
              "total_tokens": usage.total_tokens}
    if usage.cached_prompt_tokens:
        tokens["prompt_tokens_details"] = {"cached_tokens": usage.cached_prompt_tokens}
    return {**tokens, **cost_body(cost)}


def cost_body(cost: Cost) -> dict:
    """What a request cost, as reported to the client: exactly what the balance is charged."""
    return {
        "cost_usd_total": number(from_nano(cost.usd_total_nano)),
        "cost_usd_input": number(from_nano(cost.usd_input_nano)),
        "cost_usd_output": number(from_nano(cost.usd_output_nano)),
        "cost_inr": number(from_nano(cost.inr_nano)),
        "usd_to_inr": number(cost.rate),
    }


def cost_fields(cost: Cost) -> dict:
    """`cost` (USD, spec 2.4) with the INR charged and the rate used, as the embeddings and
    transcription routes report them."""
    return {"cost": number(from_nano(cost.usd_total_nano)), "cost_inr": number(from_nano(cost.inr_nano)),
            "usd_to_inr": number(cost.rate)}


def cost_headers(usd_total_nano: int, inr_nano: int, rate: Decimal, charged_inr_nano: int) -> dict[str, str]:
    """A delivered answer's cost as response headers: the amounts of `cost_body`, written the same
    way, and what the organization's balance pays for it."""
    return {COST_INR_HEADER: format_amount(from_nano(inr_nano)),
            COST_USD_HEADER: format_amount(from_nano(usd_total_nano)), RATE_HEADER: format_amount(rate),
            CHARGED_INR_HEADER: format_amount(from_nano(charged_inr_nano))}
