"""The catalogue in force now, in every process alike: each follows the prices stream
(ledger.prices) and switches at the instants its switches state, not when it noticed them.

`now()` is what a request resolves against: a clock read and a comparison with the next switch's
instant, then the catalogue already built for it. A request keeps the catalogue (and so the
prices) it was admitted with to its end. Catalogues are built in a thread (a 2,000-model one
takes about a second), so serving goes on meanwhile: a switch's catalogue is ready well before its
instant as long as `[catalogue] switch_delay_s` exceeds that time.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection, Iterable

import msgspec
import structlog

from gateway.catalogue.index import Catalogue
from gateway.catalogue.pricing import CatalogueError
from gateway.catalogue.versions import Span, Timeline, instant
from ledger import prices
from ledger.prices import Switched
from ledger.recorder import Recorded, Recorder

log = structlog.get_logger("gateway.catalogue.live")
NEVER = 2**63 - 1
KEPT_DOCUMENTS = 8  # price lists kept for GET /v1/prices; an older one is read from the ledger again
_ENCODER = msgspec.json.Encoder()


def wall_clock_us() -> int:
    return time.time_ns() // 1000


class LiveCatalogue:
    """The catalogue in force, switching on schedule; `apply` feeds it the prices stream."""

    def __init__(self, initial: Catalogue, configured: Collection[str], clock: Callable[[], int] = wall_clock_us):
        self._current, self._configured, self._clock = initial, configured, clock
        self._timeline = Timeline()
        self._built: dict[tuple[int, int], Catalogue] = {}  # (switch position, from) -> priced as then
        self._until_us = NEVER  # when the next switch is due
        self._applied = 0  # the last position of the prices stream folded in
        self._pending: list[Recorded] | None = []  # events the follower brought while loading
        self._documents: dict[str, bytes] = {}  # each version's prices, encoded
        self._building: set[asyncio.Task] = set()  # kept until each has installed what it built

    def now(self) -> Catalogue:
        """The catalogue in force at this instant."""
        if self._clock() >= self._until_us:
            self._advance()
        return self._current

    @property
    def timeline(self) -> Timeline:
        return self._timeline

    async def load(self, recorder: Recorder) -> None:
        """Fold in every switch recorded so far, then what the follower brought meanwhile."""
        recorded = await prices.every(recorder)
        for switched in recorded:
            self._fold(switched)
        self._install(await asyncio.to_thread(self._built_for, recorded, self._missing()))
        pending, self._pending = self._pending or [], None
        for event in pending:
            self.apply(event)
        self._until_us = 0

    def apply(self, recorded: Recorded) -> None:
        """The follower's listener: a switch recorded by any process."""
        if recorded.stream_id != prices.STREAM:
            return
        if self._pending is not None:
            self._pending.append(recorded)
        elif (switched := prices.switched(recorded)) is not None and switched.position > self._applied:
            self.take(switched)

    def take(self, switched: Switched, built: Iterable[Catalogue] = ()) -> None:
        """Fold in one switch (with its catalogues, when the caller built them already)."""
        if switched.position <= self._applied:
            return
        self._fold(switched)
        ready = {(switched.position, c.version): c for c in built}
        for span in self._timeline.upcoming(self._clock()):
            if span.position == switched.position and (catalogue := ready.get((span.position, span.version))):
                self._built[(span.position, span.from_us)] = catalogue
        if missing := self._missing():
            task = asyncio.get_running_loop().create_task(self._build_later(switched, missing), name="catalogue")
            self._building.add(task)
            task.add_done_callback(self._building.discard)
        self._until_us = 0  # look again at the next request

    async def close(self) -> None:
        """Wait for the catalogues being built (a thread cannot be stopped halfway)."""
        await asyncio.gather(*self._building, return_exceptions=True)

    async def _build_later(self, switched: Switched, spans: list[Span]) -> None:
        self._install(await asyncio.to_thread(self._built_for, [switched], spans))

    def _fold(self, switched: Switched) -> None:
        self._timeline.apply(switched)
        self._applied = max(self._applied, switched.position)

    def _missing(self) -> list[Span]:
        return [s for s in self._timeline.upcoming(self._clock()) if (s.position, s.from_us) not in self._built]

    def _built_for(self, switches: Iterable[Switched], spans: list[Span]) -> dict[tuple[int, int], Catalogue]:
        """The catalogue of each span whose switch is among `switches` (run in a thread: it
        reads, never changes, this object)."""
        events = {s.position: s for s in switches}
        built = {}
        for span in spans:
            if (switched := events.get(span.position)) is not None and (catalogue := self._build(switched, span)):
                built[(span.position, span.from_us)] = catalogue
        return built

    def _install(self, built: dict[tuple[int, int], Catalogue]) -> None:
        self._built.update(built)
        self._until_us = 0

    def _build(self, switched: Switched, span: Span) -> Catalogue | None:
        label = f"the catalogue switched at position {switched.position}"
        try:
            catalogue = Catalogue.parse(prices.content(switched), label, instant(span.from_us))
            catalogue.check_providers(self._configured)
        except CatalogueError as exc:  # another replica's file this one cannot serve: keep the old
            log.error("catalogue_refused", position=switched.position, reason=str(exc))
            return None
        if catalogue.version != span.version:
            log.warning("price_version_differs", recorded=span.version, computed=catalogue.version)
        return catalogue

    def _advance(self) -> None:
        now = self._clock()
        span = self._timeline.at(now)
        if span is not None and (catalogue := self._built.get((span.position, span.from_us))) is not None:
            self._current = catalogue
        self._until_us = self._timeline.following(now) or NEVER
        upcoming = {(s.position, s.from_us) for s in self._timeline.upcoming(now)}
        self._built = {key: built for key, built in self._built.items() if key in upcoming}

    async def document(self, recorder: Recorder, version: str) -> bytes | None:
        """GET /v1/prices/{version}, encoded: the version's prices and every span it was in force
        (None: never in force here, nor scheduled). Its prices are encoded once (megabytes for a
        large catalogue); a past version's are read back from the ledger, in a thread."""
        spans = self._timeline.spans(version)
        if not spans:
            return None
        data = self._documents.get(version) or await self._encoded_prices(recorder, spans[-1])
        self._remember(version, data)
        intervals = [{"effective_from": _iso(s.from_us), "effective_to": _iso(s.to_us)} for s in spans]
        head = _ENCODER.encode({"object": "price_version", "version": version, **intervals[-1],
                                "intervals": intervals})
        return head[:-1] + b',"data":' + data + b"}"

    async def _encoded_prices(self, recorder: Recorder, span: Span) -> bytes:
        built = self._built.get((span.position, span.from_us))
        if built is not None:
            return await asyncio.to_thread(_ENCODER.encode, built.prices())
        switched = await prices.at(recorder, span.position)
        if switched is None:
            raise LookupError(f"no price switch at position {span.position}")
        content, at = prices.content(switched), instant(span.from_us)
        return await asyncio.to_thread(lambda: _ENCODER.encode(Catalogue.parse(content, "a published catalogue",
                                                                                at).prices()))

    def _remember(self, version: str, data: bytes) -> None:
        self._documents[version] = data
        while len(self._documents) > KEPT_DOCUMENTS:
            self._documents.pop(next(iter(self._documents)))


def _iso(us: int | None) -> str | None:
    return None if us is None else instant(us).isoformat().replace("+00:00", "Z")
