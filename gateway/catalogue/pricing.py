"""Prices as a catalogue file states them, and the prices in force at an instant.

A provider entry's `pricing` (falling back, field by field, to its model's) states the standard
tier and may add: cache prices (read; write for five minutes and for one hour), long-context tiers
(`tiers`: prices once the prompt exceeds `above_prompt_tokens`), service tiers (`service_tiers`:
"flex", "priority", ...), batch prices, and dates: `effective_from` on the prices in force from
then on, `price_history` the earlier prices each with `effective_from` and `effective_to`.
Every price is USD as a decimal string, per token unless named otherwise.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Annotated

import msgspec

# A date must carry its timezone, so comparing it with "now" is unambiguous.
Timestamp = Annotated[datetime, msgspec.Meta(tz=True)]
TIER_NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")
RESERVED_TIERS = ("standard", "default", "batch")  # named by the gateway, never a service tier


class CatalogueError(ValueError):
    """The catalogue file is malformed; the message names the model and the field."""


def error(model: str, field: str, detail: str) -> CatalogueError:
    """The one error shape the loader raises: model, field, then what is wrong."""
    return CatalogueError(f"catalogue model {model!r}, field {field!r}: {detail}")


class TierPrices(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """One tier's prices; a price it does not state is the standard tier's."""

    prompt: str | None = None
    completion: str | None = None
    input_cache_read: str | None = None
    input_cache_write: str | None = None
    input_cache_write_1h: str | None = None


class LongContextTier(TierPrices, frozen=True, forbid_unknown_fields=True, omit_defaults=True, kw_only=True):
    """Prices that apply to a request whose prompt exceeds `above_prompt_tokens` tokens."""

    above_prompt_tokens: Annotated[int, msgspec.Meta(gt=0)]


class Dated(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True, kw_only=True):
    """What every pricing object may add: its tiers and when it is in force."""

    input_cache_write_1h: str | None = None
    batch_prompt: str | None = None
    batch_completion: str | None = None
    tiers: tuple[LongContextTier, ...] = ()
    service_tiers: dict[str, TierPrices] = {}
    effective_from: Timestamp | None = None
    effective_to: Timestamp | None = None  # only in price_history


class ProviderPricing(Dated, frozen=True, forbid_unknown_fields=True, omit_defaults=True, kw_only=True):
    """One provider's prices for a model. What it leaves out (cache and tier prices) is the
    model's (`Pricing`), so the same model is billed at each cloud's own rates where stated."""

    prompt: str
    completion: str
    image: str
    audio_music_per_generation: str
    input_cache_read: str | None = None
    input_cache_write: str | None = None
    price_history: tuple[ProviderPricing, ...] = ()


class Pricing(Dated, frozen=True, forbid_unknown_fields=True, omit_defaults=True, kw_only=True):
    """Record-level list prices (the spec's fields; "0" for a cache price: none)."""

    prompt: str
    completion: str
    image: str
    request: str
    input_cache_read: str
    input_cache_write: str
    web_search: str
    internal_reasoning: str
    video_per_second: str
    audio_music_per_generation: str
    audio_per_minute: str = "0"  # ours: transcription models bill per minute of audio
    price_history: tuple[Pricing, ...] = ()


AnyPricing = ProviderPricing | Pricing


def parse_price(model: str, field: str, text: str) -> Decimal:
    """A price string as a Decimal; it must be a finite, non-negative decimal."""
    try:
        value = Decimal(text)
    except InvalidOperation:
        raise error(model, field, f"price {text!r} is not a decimal") from None
    if not value.is_finite() or value < 0:
        raise error(model, field, f"price {text!r} must be finite and non-negative")
    return value


def _stated(pricing: msgspec.Struct, prefix: str) -> Iterator[tuple[str, str]]:
    """(field path, price text) of every price a pricing object states, tiers included."""
    for name in pricing.__struct_fields__:
        value = getattr(pricing, name)
        if isinstance(value, str) and name not in ("effective_from", "effective_to"):
            yield f"{prefix}{name}", value
    for i, tier in enumerate(getattr(pricing, "tiers", ())):
        yield from _stated(tier, f"{prefix}tiers[{i}].")
    for name, tier in getattr(pricing, "service_tiers", {}).items():
        yield from _stated(tier, f"{prefix}service_tiers.{name}.")


def check(model: str, field: str, pricing: AnyPricing) -> None:
    """Validate every price, tier and date of a pricing object and of its history."""
    for path, text in _stated(pricing, f"{field}."):
        parse_price(model, path, text)
    _check_tiers(model, field, pricing)
    if pricing.effective_to is not None:
        raise error(model, f"{field}.effective_to", "only a price_history entry ends")
    for i, past in enumerate(pricing.price_history):
        _check_past(model, f"{field}.price_history[{i}]", past, pricing.effective_from)
    _check_disjoint(model, field, pricing.price_history)


def _check_tiers(model: str, field: str, pricing: Dated) -> None:
    thresholds = [tier.above_prompt_tokens for tier in pricing.tiers]
    if thresholds != sorted(set(thresholds)):
        raise error(model, f"{field}.tiers", f"above_prompt_tokens {thresholds} must rise strictly")
    for name in pricing.service_tiers:
        if not TIER_NAME.fullmatch(name) or name in RESERVED_TIERS:
            raise error(model, f"{field}.service_tiers", f"{name!r} is not a service tier name (lower case,"
                                                         f" not one of {', '.join(RESERVED_TIERS)})")


def _check_past(model: str, field: str, past: Dated, current_from: datetime | None) -> None:
    for path, text in _stated(past, f"{field}."):
        parse_price(model, path, text)
    _check_tiers(model, field, past)
    if past.effective_from is None or past.effective_to is None or past.effective_from >= past.effective_to:
        raise error(model, field, "a past price needs effective_from before effective_to")
    if getattr(past, "price_history", ()):
        raise error(model, f"{field}.price_history", "a past price has no history of its own")
    if current_from is None or past.effective_to > current_from:
        raise error(model, f"{field}.effective_to", "a past price must end by the current price's effective_from")


def _check_disjoint(model: str, field: str, history: Iterable[Dated]) -> None:
    spans = sorted((p.effective_from, p.effective_to) for p in history
                   if p.effective_from is not None and p.effective_to is not None)
    for (_, end), (start, _) in itertools.pairwise(spans):
        if start < end:
            raise error(model, f"{field}.price_history", f"entries overlap at {start.isoformat()}")


def in_force(pricing: AnyPricing, at: datetime) -> AnyPricing | None:
    """The pricing object in force at `at`: a past one whose span holds it, else the current one
    once it has taken effect; None before any of them."""
    for past in pricing.price_history:
        if past.effective_from <= at < past.effective_to:  # type: ignore[operator]
            return past
    if pricing.effective_from is None or pricing.effective_from <= at:
        return pricing
    return None


def instants(pricing: Dated) -> Iterator[datetime]:
    """Every instant at which the prices of `pricing` change."""
    for dated in (pricing, *getattr(pricing, "price_history", ())):
        yield from (when for when in (dated.effective_from, dated.effective_to) if when is not None)
