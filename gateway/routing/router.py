"""The order in which a request's providers are tried: the request's `provider` object first
(only, ignore, order, allow_fallbacks, sort), then the strategy (`[routing] strategy`: the
catalogue's priority order, lowest price, or lowest observed latency), and circuits that are
open last out: skipped while another provider can serve. When every provider's circuit is open
the request still tries them in order: a breaker moves traffic, it never invents an outage."""

from collections.abc import Sequence
from decimal import Decimal
from typing import Generic, Protocol, TypeVar

import msgspec

from gateway.catalogue import Resolved
from gateway.config import RoutingConfig
from gateway.edge.errors import bad_request
from gateway.routing.circuits import Circuits
from gateway.routing.preferences import FIELD, NONE, Preferences

LATENCY_WEIGHT = 0.2  # of the newest sample in a provider's moving average


class Candidate(Protocol):
    """A provider a request may go to: the model as that provider serves it (and its adapter)."""

    @property
    def model(self) -> Resolved: ...


P = TypeVar("P", bound=Candidate)


class Plan(msgspec.Struct, Generic[P], frozen=True):
    """The providers to try, in order; `respect_circuits` false when all of them are open."""

    candidates: tuple[P, ...]
    respect_circuits: bool = True


class Router:
    """Orders candidates; holds the latency each provider showed in this process."""

    def __init__(self, config: RoutingConfig, circuits: Circuits) -> None:
        self.config, self.circuits = config, circuits
        self._latency: dict[str, float] = {}  # seconds to response headers, moving average

    def observe(self, provider: str, status: int, seconds: float) -> None:
        """A provider's time to its response headers (only answers count: an error is fast)."""
        if status < 400:
            previous = self._latency.get(provider)
            self._latency[provider] = seconds if previous is None else \
                previous + LATENCY_WEIGHT * (seconds - previous)

    def latency(self, provider: str) -> float:
        """0 for a provider not yet seen here, so that it is tried and measured."""
        return self._latency.get(provider, 0.0)

    async def plan(self, candidates: Sequence[P], preferences: Preferences, model: str) -> Plan[P]:
        """`candidates` (the catalogue's order) in the order to try them; 400 when the
        preferences leave none."""
        if len(candidates) == 1 and preferences is NONE:  # most models: one provider, tried whatever its circuit
            return Plan(tuple(candidates), respect_circuits=False)
        chosen = _preferred(self._sorted(_allowed(candidates, preferences, model), preferences), preferences)
        if len(chosen) > 1:
            await self.circuits.refresh(c.model.provider_id for c in chosen)
        closed = [c for c in chosen if self.circuits.admits(c.model.provider_id)]
        return Plan(tuple(closed)) if closed else Plan(tuple(chosen), respect_circuits=False)

    def _sorted(self, candidates: list[P], preferences: Preferences) -> list[P]:
        match preferences.sort or self.config.strategy:
            case "price":
                return sorted(candidates, key=lambda c: _price(c.model))
            case "latency":
                return sorted(candidates, key=lambda c: self.latency(c.model.provider_id))
            case _:
                return candidates


def _allowed(candidates: Sequence[P], preferences: Preferences, model: str) -> list[P]:
    """The candidates `only` and `ignore` leave; 400 naming the model's providers when none."""
    allowed = [c for c in candidates if c.model.provider_id not in preferences.ignore
               and (preferences.only is None or c.model.provider_id in preferences.only)]
    if not allowed:
        served_by = ", ".join(c.model.provider_id for c in candidates)
        raise bad_request(f"provider preferences leave no provider for model {model!r}; it is served by"
                          f" {served_by}", FIELD)
    return allowed


def _preferred(candidates: list[P], preferences: Preferences) -> list[P]:
    """Those named in `order` first, in its order; without fallbacks, only those (or the first)."""
    rank = {provider: i for i, provider in enumerate(preferences.order)}
    ordered = sorted(candidates, key=lambda c: rank.get(c.model.provider_id, len(rank)))
    if preferences.allow_fallbacks:
        return ordered
    named = [c for c in ordered if c.model.provider_id in rank]
    return named or ordered[:1]


def _price(model: Resolved) -> tuple[Decimal, Decimal, Decimal]:
    """What a provider charges, cheapest first: by the token, then per generation, per minute."""
    prices = model.prices
    return prices.prompt + prices.completion, prices.per_generation, prices.audio_per_minute
