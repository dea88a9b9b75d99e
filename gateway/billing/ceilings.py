"""The most a request can cost, before it is made: what `reservations.cover` holds.

Token-priced models: the prompt (estimated from above, see `prompt_bound`; media parts at the
most their provider bills for them, `gateway.billing.media`) at the dearest price a prompt
token has in any tier it may be served at (`Prices.ceiling`), plus, at the completion price, the
output the request lets the model write AS IT IS SENT UPSTREAM to the provider that answers (an `Allowance`, which each
adapter reads off the body it sends: the limit it forwards, else the model's output limit, in
each answer it asks for). Which body goes to which provider is each route's to say
(gateway.chat.service, messages, completions, embeddings, responses.service, realtime). Flat-priced
models: the price.
"""

from collections.abc import Callable, Iterable
from decimal import Decimal

from gateway.billing import media
from gateway.billing.pricing import NO_USAGE, cached, priced_cost
from gateway.catalogue import Resolved
from gateway.jsonio import encode
from gateway.providers.base import Allowance
from gateway.providers.usage import Usage
from gateway.services import Services
from ledger.money import to_nano

OUTPUT_LIMITS = ("max_completion_tokens", "max_response_output_tokens")


def output_limit(model: Resolved) -> int:
    """The most output tokens one answer of `model` may hold: its catalogue limit, else its context."""
    for name in OUTPUT_LIMITS:
        if (limit := model.record.limit(name)) is not None:
            return limit
    return model.record.context_length


def size(payload: object) -> int:
    """The payload's bytes: as UTF-8 for text, as JSON otherwise."""
    if isinstance(payload, bytes):
        return len(payload)
    if isinstance(payload, str):
        return len(payload) if payload.isascii() else len(payload.encode())
    return len(encode(payload))


def prompt_bound(model: Resolved, payload: object, shared: int = 0, protocol: str | None = None) -> int:
    """At most as many tokens as the payload has bytes (a token covers at least one byte), with
    `shared` more bytes it is sent along with, and never beyond the model's context. Its media
    parts count instead at the most a provider speaking `protocol` bills for each
    (`media.bound`), or, where that has no bound (or the protocol is not given), a context."""
    context = model.record.context_length
    tokens = size(payload) + shared
    for part in media.parts(payload):
        most, counted = media.bound(protocol, model.upstream_model, part), size(part)
        tokens += (context or counted if most is None else most) - counted
    return min(tokens, context) if context else tokens


def protocol(services: Services, model: Resolved) -> str | None:
    """The wire protocol of the provider that serves `model`, whose media rules bound its prompt."""
    provider = services.config.providers.get(model.provider_id)
    return provider.protocol if provider is not None else None


def inputs_bound(model: Resolved, inputs: Iterable[object], shared: int = 0) -> int:
    """Inputs the provider takes apart (embeddings' inputs, text completions' prompts): each is
    bounded on its own (`prompt_bound`), so each may fill a context."""
    return sum(prompt_bound(model, item, shared) for item in inputs)


def output_bound(model: Resolved, allowance: Allowance) -> int:
    """The output tokens `allowance` lets `model` write: its limit (or, without one, the model's
    own) in each of its answers. A model never writes past its own limit."""
    most = output_limit(model)
    each = most if allowance.each is None else min(allowance.each, most) if most else allowance.each
    return each * allowance.answers


def tokens(services: Services, model: Resolved, prompt_tokens: int, output_tokens: int,
           spent: Usage = NO_USAGE, asked: object = None) -> int:
    """`spent` and `prompt_tokens` and `output_tokens` more, in nano-INR, each part at its dearest
    price in any tier it could be charged at (`Prices.ceiling`: a long prompt's, the service tier
    it `asked` for), the prompt not yet seen at the dearest any prompt token has: priced as one
    usage, as a request is charged, so no rounding comes between them. A provider that serves a
    dearer tier unasked is charged for all the same (billing.charging.settle notes it)."""
    usage = Usage(spent.prompt_tokens + prompt_tokens, spent.completion_tokens + output_tokens,
                  spent.cached_prompt_tokens, spent.cache_write_tokens, spent.cache_write_1h_tokens + prompt_tokens)
    dearest = model.prices.ceiling(usage.prompt_tokens, asked)
    return priced_cost(cached(dearest, usage), usage, services.config.billing.usd_to_inr).inr_nano


def worst(services: Services, model: Resolved, prompt_tokens: int, allowance: Allowance, asked: object = None) -> int:
    """`prompt_tokens` and the output `allowance` lets `model` write, at their dearest prices
    (in the service tier `asked` for, too)."""
    return tokens(services, model, prompt_tokens, output_bound(model, allowance), asked=asked)


def sent(services: Services, prompt: object, allowance: Callable[[Resolved], Allowance], asked: object = None
         ) -> Callable[[Resolved], int]:
    """A request's ceiling on whichever model it is tried: its `prompt` (`prompt_bound`) and the
    output `allowance(model)` reads off what it sends that model's provider, at the dearest prices
    of the tiers it may be served at (the `service_tier` it `asked` for among them)."""
    return lambda model: worst(services, model, prompt_bound(model, prompt, protocol=protocol(services, model)),
                               allowance(model), asked)


def per_minute(services: Services, model: Resolved, seconds: Decimal) -> int:
    """`seconds` of audio at the model's per-minute price, in nano-INR."""
    return to_nano(seconds * model.prices.audio_per_minute / 60 * services.config.billing.usd_to_inr)
