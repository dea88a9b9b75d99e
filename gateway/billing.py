"""What a request costs: tokens times catalogue prices in USD, converted to INR, exactly."""

from decimal import Decimal

import msgspec

from gateway.jsonio import number
from ledger.money import from_nano, to_nano


class Usage(msgspec.Struct, frozen=True):
    prompt_tokens: int = 0
    completion_tokens: int = 0

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


def token_cost(usage: Usage, prompt_price: Decimal, completion_price: Decimal, rate: Decimal) -> Cost:
    """Cost of `usage` at per-token USD prices; INR is the exact USD total times `rate`."""
    usd_in, usd_out = to_nano(usage.prompt_tokens * prompt_price), to_nano(usage.completion_tokens * completion_price)
    return Cost(usd_in, usd_out, to_nano(from_nano(usd_in + usd_out) * rate), rate)


def usage_body(usage: Usage, cost: Cost) -> dict:
    """The chat `usage` object of spec 2.5, plus the INR charged and the rate used."""
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
        "cost_usd_total": number(from_nano(cost.usd_total_nano)),
        "cost_usd_input": number(from_nano(cost.usd_input_nano)),
        "cost_usd_output": number(from_nano(cost.usd_output_nano)),
        "cost_inr": number(from_nano(cost.inr_nano)),
        "usd_to_inr": number(cost.rate),
    }
