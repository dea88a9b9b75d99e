"""Price versions over time: which version is in force when, from the switches the prices
stream records (ledger.prices), and the switches a catalogue makes once published.

A switch supersedes every switch the stream had scheduled at or after its first instant, so the
last catalogue published decides the future, and the past is never rewritten: a catalogue is
never put in force before it was published.
"""

from __future__ import annotations

import bisect
from datetime import UTC, datetime
from typing import NamedTuple

from gateway.catalogue.index import Catalogue
from ledger.events import PriceSwitch
from ledger.prices import Switched


class Span(NamedTuple):
    """One stretch of time one version was (or will be) in force, and the switch that made it."""

    from_us: int
    version: str
    position: int  # of the CatalogueSwitched event
    to_us: int | None = None  # None: until a later switch


def instant(us: int) -> datetime:
    return datetime.fromtimestamp(us / 1e6, UTC)


def microseconds(moment: datetime) -> int:
    return int(moment.timestamp() * 1_000_000)


def schedule(catalogue: Catalogue, first: datetime) -> list[tuple[PriceSwitch, Catalogue]]:
    """The switches `catalogue` makes when put in force at `first`: its prices then, then each
    later change its dates state, each with the catalogue priced as then (CatalogueError when some
    entry has no price then)."""
    made = [catalogue.priced_at(first)]
    for change in catalogue.changes():
        if change > first and (priced := catalogue.priced_at(change)).version != made[-1].version:
            made.append(priced)
    return [(PriceSwitch(priced.version, microseconds(priced.at)), priced) for priced in made]


class Timeline:
    """The versions in force over time, as the prices stream has them so far."""

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._spans: list[Span] = []

    def apply(self, switched: Switched) -> None:
        """Fold one recorded switch in: from its first instant on, its switches replace any."""
        first = switched.event.switches[0].effective_from_us
        keep = bisect.bisect_left(self._starts, first)
        added = [Span(s.effective_from_us, s.version, switched.position) for s in switched.event.switches]
        self._spans = self._spans[:keep] + added
        self._starts = [span.from_us for span in self._spans]

    def at(self, at_us: int) -> Span | None:
        """The span in force at `at_us` (None before the first)."""
        i = bisect.bisect_right(self._starts, at_us) - 1
        return self._ended(i) if i >= 0 else None

    def following(self, at_us: int) -> int | None:
        """When the next switch after `at_us` is due, if one is scheduled."""
        i = bisect.bisect_right(self._starts, at_us)
        return self._starts[i] if i < len(self._starts) else None

    def spans(self, version: str) -> list[Span]:
        """Every span `version` was or is in force, with its end (None: still in force)."""
        found: list[Span] = []
        for i, span in enumerate(self._spans):
            if span.version != version:
                continue
            span = self._ended(i)
            if found and found[-1].to_us == span.from_us:  # republished unchanged: one stretch
                span = found.pop()._replace(to_us=span.to_us)
            found.append(span)
        return found

    def upcoming(self, at_us: int) -> list[Span]:
        """The span in force at `at_us` and every later one."""
        i = max(bisect.bisect_right(self._starts, at_us) - 1, 0)
        return self._spans[i:]

    def _ended(self, i: int) -> Span:
        ends = self._starts[i + 1] if i + 1 < len(self._starts) else None
        return self._spans[i]._replace(to_us=ends)
