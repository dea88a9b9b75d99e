"""What a request costs: tokens times catalogue prices in USD, converted to INR, exactly."""

from decimal import Decimal

import msgspec

from gateway.jsonio import number
from ledger.money import from_nano, to_nano


class Usage(msgspec.Struct, frozen=True):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0  # the part of prompt_tokens read from the provider's prompt cache
    cache_write_tokens: int = 0  # the part of prompt_tokens written to it (Anthropic prices it apart)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class Cost(msgspec.Struct, frozen=True):
    """Amounts in nano-units, so what is reported is exactly what is charged."""

    usd_input_nano: int
    usd_output_nano: int
    inr_nano: int
    rate: Decimal

    @property
    def usd_total_nano(self) -> int:
        return self.usd_input_nano + self.usd_output_nano


FREE = Cost(0, 0, 0, Decimal(0))


def token_cost(usage: Usage, prompt_price: Decimal, completion_price: Decimal, rate: Decimal,
               cache_read_price: Decimal | None = None, cache_write_price: Decimal | None = None) -> Cost:
    """Cost of `usage` at per-token USD prices; INR is the exact USD total times `rate`.

    Prompt tokens read from the cache cost `cache_read_price`, those written to it
    `cache_write_price` (None: the prompt price), the rest the prompt price.
    """
    read = usage.cached_prompt_tokens * (prompt_price if cache_read_price is None else cache_read_price)
    written = usage.cache_write_tokens * (prompt_price if cache_write_price is None else cache_write_price)
    plain = usage.prompt_tokens - usage.cached_prompt_tokens - usage.cache_write_tokens
    usd_in = to_nano(plain * prompt_price + read + written)
    usd_out = to_nano(usage.completion_tokens * completion_price)
    return Cost(usd_in, usd_out, to_nano(from_nano(usd_in + usd_out) * rate), rate)


def usage_body(usage: Usage, cost: Cost) -> dict:
    """The chat `usage` object of spec 2.5, plus the INR charged and the rate used."""
    tokens = {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
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
