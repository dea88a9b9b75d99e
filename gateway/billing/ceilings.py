"""The most a request can cost, before it is made: what `reservations.cover` holds.

Token-priced models: the prompt (estimated from above, see `prompt_bound`) at the dearer of the
prompt and cache-write prices, plus the output the request allows (its max_tokens, else the
model's output limit) at the completion price. Flat-priced models: the price.
"""

from collections.abc import Callable
from decimal import Decimal

from gateway.billing.pricing import Usage, token_cost
from gateway.catalogue import Resolved
from gateway.jsonio import encode
from gateway.services import Services
from ledger.money import to_nano

OUTPUT_LIMITS = ("max_completion_tokens", "max_response_output_tokens")
TOKEN_FIELDS = ("max_completion_tokens", "max_tokens", "max_output_tokens", "max_response_output_tokens")


def output_limit(model: Resolved) -> int:
    """The most output tokens one answer of `model` may hold: its catalogue limit, else its context."""
    for name in OUTPUT_LIMITS:
        if (limit := model.record.per_request_limits.get(name, "")).isdigit():
            return int(limit)
    return model.record.context_length


def prompt_bound(model: Resolved, payload: object) -> int:
    """At most as many tokens as the payload's JSON has bytes (a token covers at least one byte),
    and never beyond the model's context."""
    size = len(payload) if isinstance(payload, bytes | str) else len(encode(payload))
    context = model.record.context_length
    return min(size, context) if context else size


def requested_output(body: dict) -> int | None:
    """The output limit a request body sets (the first of the APIs' names present), if any."""
    for name in TOKEN_FIELDS:
        if isinstance(value := body.get(name), int) and not isinstance(value, bool) and value >= 0:
            return value
    return None


def tokens(services: Services, model: Resolved, prompt_tokens: int, output_tokens: int) -> int:
    """`prompt_tokens` and `output_tokens` at their dearest prices, in nano-INR."""
    prices = model.prices
    worst_prompt = max(prices.prompt, prices.input_cache_write)
    rate = services.config.billing.usd_to_inr
    return token_cost(Usage(prompt_tokens, output_tokens), worst_prompt, prices.completion, rate).inr_nano


def of_body(services: Services, body: dict, model: Resolved, prompt: object | None = None) -> int:
    """A request body's ceiling on `model`: its prompt (the body, unless `prompt` is given) and
    the output it allows, for each of the `n` choices it asks for."""
    output = requested_output(body)
    limit = output_limit(model)
    each = limit if output is None else min(output, limit) if limit else output
    return tokens(services, model, prompt_bound(model, body if prompt is None else prompt), each * choices(body))


def choices(body: dict) -> int:
    """How many answers a request asks for (chat's and completions' `n`; 1 when absent)."""
    n = body.get("n")
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 1 else 1


def for_body(services: Services, body: dict, prompt: object | None = None) -> Callable[[Resolved], int]:
    """`of_body` for whichever model the request is tried on."""
    return lambda model: of_body(services, body, model, prompt)


def per_minute(services: Services, model: Resolved, seconds: Decimal) -> int:
    """`seconds` of audio at the model's per-minute price, in nano-INR."""
    return to_nano(seconds * model.prices.audio_per_minute / 60 * services.config.billing.usd_to_inr)
