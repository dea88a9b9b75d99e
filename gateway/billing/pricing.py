"""What a request costs: tokens times catalogue prices in USD, converted to INR, exactly."""

from decimal import Decimal

import msgspec

from gateway.catalogue import Prices
from gateway.edge.errors import UpstreamError
from gateway.jsonio import number
from ledger.money import format_amount, from_nano, to_nano

# The response headers that state a delivered answer's cost, as `cost_body` does in the body.
COST_INR_HEADER, COST_USD_HEADER, RATE_HEADER = "X-Gateway-Cost-INR", "X-Gateway-Cost-USD", "X-Gateway-USD-INR-Rate"
CHARGED_INR_HEADER = "X-Gateway-Charged-INR"  # what the balance pays: the cost, or 0 on the org's own key

# The most one request may report. Far above any model's context plus output (and any audio
# upload), far below what could overflow a price computation: larger is a broken upstream.
MAX_REPORTED_TOKENS = 10**8
MAX_REPORTED_SECONDS = 10**6


class Usage(msgspec.Struct, frozen=True):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0  # the part of prompt_tokens read from the provider's prompt cache
    cache_write_tokens: int = 0  # the part of prompt_tokens written to it (Anthropic prices it apart)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def invalid_usage(provider: str, problem: str) -> UpstreamError:
    """A provider's usage report billing cannot trust: its answer is a 502, recorded, not charged."""
    return UpstreamError(502, f"{provider} sent an invalid usage report: {problem}")


def usage_report(provider: str, value: object) -> dict:
    """A usage object as reported (absent or null: empty); anything but a JSON object is invalid."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise invalid_usage(provider, f"usage is {_shown(value)}, not an object")
    return value


def token_count(provider: str, report: dict, name: str) -> int:
    """`report[name]` as a token count (absent or null: 0). Only an integer from 0 to
    MAX_REPORTED_TOKENS is one: never a bool, a float or a string."""
    value = report.get(name)
    if value is None:
        return 0
    if not _is_count(value):
        raise invalid_usage(provider, f"{name} is {_shown(value)}")
    return value


def checked_usage(provider: str, usage: Usage) -> Usage:
    """`usage` when its parts add up: the cached and cache-written tokens are part of the prompt
    and every total is within MAX_REPORTED_TOKENS. Every adapter's usage passes here."""
    counts = (usage.prompt_tokens, usage.completion_tokens, usage.cached_prompt_tokens, usage.cache_write_tokens)
    if not all(_is_count(n) for n in counts):  # sums of sound counts may still be too large
        raise invalid_usage(provider, f"token counts {counts} are out of bounds")
    if usage.cached_prompt_tokens + usage.cache_write_tokens > usage.prompt_tokens:
        raise invalid_usage(provider, f"{usage.cached_prompt_tokens} cached and {usage.cache_write_tokens}"
                                      f" cache-written tokens exceed the {usage.prompt_tokens} prompt tokens")
    return usage


def reported_seconds(provider: str, name: str, value: object) -> Decimal | None:
    """A reported audio duration as an exact Decimal (None when not reported): a non-negative
    number of at most MAX_REPORTED_SECONDS, never a bool or a string."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= MAX_REPORTED_SECONDS:
        raise invalid_usage(provider, f"{name} is {_shown(value)}")
    return Decimal(str(value))


def _is_count(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, int) and 0 <= value <= MAX_REPORTED_TOKENS


def _shown(value: object) -> str:
    return repr(value)[:40]


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
NO_USAGE = Usage()


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


def model_cost(prices: Prices, usage: Usage, rate: Decimal) -> Cost:
    """What `usage` costs at a model's catalogue prices; prompt tokens read from (written to) the
    provider's cache cost its cache-read (cache-write) price, or the prompt price where the
    catalogue row has none ("0")."""
    return token_cost(usage, prices.prompt, prices.completion, rate,
                      prices.input_cache_read or None, prices.input_cache_write or None)


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
