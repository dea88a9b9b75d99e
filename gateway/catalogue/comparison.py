"""A catalogue entry's prices beside the source's (gateway.catalogue.source), compared as the
gateway charges them (gateway.catalogue.prices), so that two ways of stating one price agree:
"0.0000030" is "0.000003", a cache price not stated (or "0") is the prompt's, a one-hour cache
write not stated the five-minute one, a tier's price not stated the standard one, batch prices not
stated the standard ones, and an entry's price not stated its record's.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal

from ledger.money import format_amount

TOKEN_FIELDS = ("prompt", "completion", "input_cache_read", "input_cache_write", "input_cache_write_1h")
Prices = dict[str, Decimal]


@dataclass(frozen=True)
class Difference:
    """One price the catalogue charges otherwise than the source says."""

    field: str
    catalogue: Decimal
    source: Decimal

    def body(self) -> dict[str, str]:
        return {"field": self.field, "catalogue": format_amount(self.catalogue), "source": format_amount(self.source)}


def _stated(entry: Mapping, record: Mapping, name: str) -> str | None:
    """An entry's price, else its record's (the catalogue's fallback), None when neither states it."""
    own = entry.get(name)
    return own if own is not None else record.get(name)


def _cache(text: str | None) -> Decimal | None:
    """A stated cache price; "0" is a catalogue's way of saying there is none."""
    return Decimal(text) if text is not None and Decimal(text) else None


def _standard(entry: Mapping, record: Mapping) -> Prices:
    prompt = Decimal(entry["prompt"])
    write = _cache(_stated(entry, record, "input_cache_write")) or prompt
    return {"prompt": prompt, "completion": Decimal(entry["completion"]),
            "input_cache_read": _cache(_stated(entry, record, "input_cache_read")) or prompt,
            "input_cache_write": write,
            "input_cache_write_1h": _cache(_stated(entry, record, "input_cache_write_1h")) or write}


def _tier(standard: Prices, stated: Mapping) -> Prices:
    return {name: Decimal(stated[name]) if stated.get(name) is not None else standard[name] for name in TOKEN_FIELDS}


@dataclass(frozen=True)
class Charged:
    """Every price one entry is charged at: the standard tier, its long-context tiers (by
    threshold), service tiers (by name), batch prices and the price a minute of audio."""

    standard: Prices
    long_context: dict[int, Prices]
    service: dict[str, Prices]
    batch: Prices
    per_minute: Decimal

    @classmethod
    def of(cls, entry: Mapping, record: Mapping) -> Charged:
        """An entry's `pricing` with its record's `pricing` (what the entry leaves out)."""
        standard = _standard(entry, record)
        tiered = entry if entry.get("tiers") or entry.get("service_tiers") else record
        batch = {name: Decimal(text) if (text := _stated(entry, record, f"batch_{name}")) is not None
                 else standard[name] for name in ("prompt", "completion")}
        return cls(standard, {tier["above_prompt_tokens"]: _tier(standard, tier) for tier in tiered.get("tiers", ())},
                   {name: _tier(standard, tier) for name, tier in tiered.get("service_tiers", {}).items()},
                   batch, Decimal(record.get("audio_per_minute", "0")))

    def above(self, threshold: int) -> Prices:
        """The prices of a prompt just over `threshold` tokens."""
        below = [t for t in self.long_context if t <= threshold]
        return self.long_context[max(below)] if below else self.standard


def _pairs(ours: Charged, theirs: Charged) -> Iterator[tuple[str, Prices, Prices]]:
    """(field prefix, our prices, their prices) for every tier either side states."""
    yield "", ours.standard, theirs.standard
    for threshold in sorted({*ours.long_context, *theirs.long_context}):
        yield f"tiers.above_{threshold}.", ours.above(threshold), theirs.above(threshold)
    for name in sorted({*ours.service, *theirs.service}):
        yield (f"service_tiers.{name}.", ours.service.get(name, ours.standard),
               theirs.service.get(name, theirs.standard))
    yield "batch_", ours.batch, theirs.batch


def differences(entry: Mapping, record: Mapping, source: Mapping) -> list[Difference]:
    """Where an entry (`pricing` of a provider entry, with its record's `pricing`) is charged
    otherwise than the source's prices (`gateway.catalogue.source.stated`) say."""
    ours, theirs = Charged.of(entry, record), Charged.of(source, source)
    found = [Difference(f"{prefix}{name}", mine[name], other[name])
             for prefix, mine, other in _pairs(ours, theirs) for name in mine if mine[name] != other[name]]
    if ours.per_minute != theirs.per_minute:
        found.append(Difference("audio_per_minute", ours.per_minute, theirs.per_minute))
    return found
