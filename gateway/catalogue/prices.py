"""The prices a request is charged at: a provider entry's stated prices, with the model's as the
fallback, parsed once per catalogue version into the `Priced` each tier records
(ledger.events.Priced), so pricing a request is picking a tier and filling in its tokens.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal
from types import MappingProxyType

import msgspec

from gateway.catalogue.pricing import AnyPricing, Pricing, ProviderPricing, TierPrices, error, in_force
from ledger import charges, price_tiers
from ledger.events import Priced
from ledger.money import format_amount

TOKEN_PRICES = ("prompt_usd", "completion_usd", "cache_read_usd", "cache_write_usd", "cache_write_1h_usd")


class Prices(msgspec.Struct, frozen=True):
    """Parsed prices of one (record, provider entry) pair in one price version."""

    prompt: Decimal
    completion: Decimal
    input_cache_read: Decimal
    input_cache_write: Decimal
    per_generation: Decimal
    audio_per_minute: Decimal
    per_token: Priced  # the standard tier as a request records it (gateway.billing.pricing)
    long_context: tuple[tuple[int, Priced], ...] = ()  # (above_prompt_tokens, prices), rising
    service_tiers: Mapping[str, Priced] = MappingProxyType({})
    batch: Priced | None = None  # as the catalogue states them (None: it states none)
    batch_halved: Priced | None = None  # the batch tier when it states none: every price halved
    # Each price at its highest in the tiers a request may be served at, by the service tier it asks
    # for ("": none) and the number of long-context thresholds its prompt may pass.
    ceilings: Mapping[tuple[str, int], Priced] = MappingProxyType({})
    version: str = ""

    def tier(self, prompt_tokens: int, served: str = "", batch: bool = False) -> Priced:
        """The tier a request is charged at (ledger.price_tiers), its prices ready to record."""
        name = price_tiers.tier(prompt_tokens, served, (t for t, _ in self.long_context), self.service_tiers,
                                batch, (self.batch or self.batch_halved) is not None)
        if name == price_tiers.STANDARD:
            return self.per_token
        if name == price_tiers.BATCH:
            return self.batch or self.batch_halved  # type: ignore[return-value]  # not None: has_batch
        return self.service_tiers.get(name) or dict(self.long_context)[price_tiers.threshold_of(name) or 0]

    def ceiling(self, prompt_tokens: int, asked: object = None) -> Priced:
        """The prices a hold reserves at: each at its highest in the standard tier, the long-context
        tiers a prompt of up to `prompt_tokens` may reach, and the service tier the request `asked`
        for (one that asks for none is served the provider's default)."""
        passed = sum(prompt_tokens > threshold for threshold, _ in self.long_context)
        tier = asked if isinstance(asked, str) and asked in self.service_tiers else ""
        return self.ceilings[(tier, passed)]

    def batched(self) -> Prices:
        """These prices as a line of a provider's batch pays them: the batch tier, whatever its
        prompt's length or the service tier asked for (so a ceiling is taken at them too)."""
        batch = self.tier(0, "", batch=True)
        return msgspec.structs.replace(self, per_token=batch, long_context=(), service_tiers=MappingProxyType({}),
                                       ceilings=MappingProxyType({("", 0): batch}))

    def published(self, image: str) -> dict:
        """These prices as GET /v1/prices/{version} publishes them: every tier in full."""
        body: dict[str, object] = {**_token_prices(self.per_token), "image": image,
                "audio_music_per_generation": format_amount(self.per_generation),
                "audio_per_minute": format_amount(self.audio_per_minute)}
        if self.batch is not None:
            body |= {"batch_prompt": self.batch.prompt_usd, "batch_completion": self.batch.completion_usd}
        if self.long_context:
            body["tiers"] = [{"above_prompt_tokens": t, **_token_prices(p)} for t, p in self.long_context]
        if self.service_tiers:
            body["service_tiers"] = {name: _token_prices(p) for name, p in self.service_tiers.items()}
        return body


# The names GET /v1/prices uses for the prices a Priced records.
_PUBLISHED = {"prompt_usd": "prompt", "completion_usd": "completion", "cache_read_usd": "input_cache_read",
              "cache_write_usd": "input_cache_write", "cache_write_1h_usd": "input_cache_write_1h"}


def _token_prices(priced: Priced) -> dict[str, str]:
    return {published: getattr(priced, field) for field, published in _PUBLISHED.items()}


def _first(*stated: str | None) -> str | None:
    return next((text for text in stated if text is not None), None)


def _cache(text: str | None) -> Decimal | None:
    """A stated cache price; "0" is the spec's way of saying there is none (the prompt price)."""
    return Decimal(text) if text is not None and Decimal(text) else None


class _Standard(msgspec.Struct, frozen=True):
    """The standard tier's prices as stated: a cache price None where none is (the prompt's)."""

    prompt: Decimal
    completion: Decimal
    read: Decimal | None
    write: Decimal | None
    write_1h: Decimal | None

    def priced(self, version: str, name: str) -> Priced:
        base = charges.per_token(self.prompt, self.completion, self.read, self.write, self.write_1h)
        return msgspec.structs.replace(base, version=version, tier=name)


def _tier(standard: _Standard, stated: TierPrices, version: str, name: str) -> Priced:
    """A tier's prices: what it states, the standard tier's for the rest; a cache price neither
    states is the tier's own prompt price (one-hour writes: its five-minute writes')."""
    def price(own: str | None, fallback: Decimal | None) -> Decimal | None:
        return Decimal(own) if own is not None else fallback

    prompt, completion = price(stated.prompt, standard.prompt), price(stated.completion, standard.completion)
    return _Standard(prompt or Decimal(0), completion or Decimal(0), price(stated.input_cache_read, standard.read),
                     price(stated.input_cache_write, standard.write),
                     price(stated.input_cache_write_1h, standard.write_1h)).priced(version, name)


def _dearest(tiers: list[Priced]) -> Priced:
    """Each price at its highest in any tier; a one-hour cache write at the highest price any prompt
    token has (a hold prices the prompt it has not yet seen as such writes: ceilings.tokens)."""
    def most(field: str) -> Decimal:
        return max(Decimal(getattr(p, field)) for p in tiers)

    prompt_prices = [field for field in TOKEN_PRICES if field != "completion_usd"]
    return charges.per_token(most("prompt_usd"), most("completion_usd"), most("cache_read_usd"),
                             most("cache_write_usd"), max(most(field) for field in prompt_prices))


def prices_at(model_id: str, model: Pricing, entry: ProviderPricing, at: datetime, version: str = "") -> Prices:
    """The prices of a model's provider entry in force at `at`; CatalogueError when either has no
    price then (its pricing takes effect later and no past price covers the time before)."""
    own, fallback = in_force(entry, at), in_force(model, at)
    if own is None or fallback is None:
        raise error(model_id, "pricing", f"no price is in force at {at.isoformat()}: state the price"
                                         " before its effective_from in price_history")
    return _parsed(own, fallback, version)  # type: ignore[arg-type]


def _parsed(own: ProviderPricing, model: Pricing, version: str) -> Prices:
    prompt, completion = Decimal(own.prompt), Decimal(own.completion)
    read = _cache(_first(own.input_cache_read, model.input_cache_read))
    write = _cache(_first(own.input_cache_write, model.input_cache_write))
    write_1h = _cache(_first(own.input_cache_write_1h, model.input_cache_write_1h))
    stated = _Standard(prompt, completion, read, write, write_1h)
    standard = stated.priced(version, price_tiers.STANDARD)
    tiers: AnyPricing = own if own.tiers or own.service_tiers else model
    long_context = tuple((t.above_prompt_tokens, _tier(stated, t, version, price_tiers.long_context(
        t.above_prompt_tokens))) for t in tiers.tiers)
    service = {name: _tier(stated, t, version, name) for name, t in tiers.service_tiers.items()}
    batch = _batch(stated, _first(own.batch_prompt, model.batch_prompt),
                   _first(own.batch_completion, model.batch_completion), version)
    reached = [[standard, *(p for _, p in long_context[:n])] for n in range(len(long_context) + 1)]
    ceilings = {(name, n): _dearest([*tiers, *([service[name]] if name else [])])
                for name in ("", *service) for n, tiers in enumerate(reached)}
    return Prices(prompt=prompt, completion=completion, input_cache_read=read or Decimal(0),
                  input_cache_write=write or Decimal(0), per_generation=Decimal(own.audio_music_per_generation),
                  audio_per_minute=Decimal(model.audio_per_minute), per_token=standard, long_context=long_context,
                  service_tiers=MappingProxyType(service), batch=batch,
                  batch_halved=_halved(stated, version), ceilings=MappingProxyType(ceilings),
                  version=version)


def _batch(standard: _Standard, prompt: str | None, completion: str | None, version: str) -> Priced | None:
    if prompt is None and completion is None:
        return None
    return _tier(standard, TierPrices(prompt=prompt, completion=completion), version, price_tiers.BATCH)


def _halved(standard: _Standard, version: str) -> Priced:
    """The batch tier of prices that state none: every standard price halved (price_tiers.batch_default)."""

    def half(price: Decimal | None) -> Decimal | None:
        return None if price is None else price_tiers.batch_default(price)

    return _Standard(half(standard.prompt) or Decimal(0), half(standard.completion) or Decimal(0), half(standard.read),
                     half(standard.write), half(standard.write_1h)).priced(version, price_tiers.BATCH)


def versioned(prices: Prices, version: str) -> Prices:
    """`prices` as version `version` records them (the version is the hash of what they publish,
    so it is known only once they are built)."""
    def mark(priced: Priced) -> Priced:
        return msgspec.structs.replace(priced, version=version)

    return msgspec.structs.replace(
        prices, per_token=mark(prices.per_token), long_context=tuple((t, mark(p)) for t, p in prices.long_context),
        service_tiers=MappingProxyType({n: mark(p) for n, p in prices.service_tiers.items()}),
        batch=prices.batch and mark(prices.batch), batch_halved=prices.batch_halved and mark(prices.batch_halved),
        version=version)
