"""Putting a catalogue file in force across a deployment: validated, then recorded in the prices
stream (ledger.prices) for every process to follow. A gateway does it at start-up and on SIGHUP,
`gateway admin reload-catalogue` from anywhere; a file that does not validate is refused with
the reason, and nothing is recorded.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable, Collection
from datetime import datetime

import msgspec

from gateway.catalogue.index import Catalogue, read
from gateway.config import Config
from gateway.catalogue.live import wall_clock_us
from gateway.catalogue.versions import instant, schedule
from ledger import prices
from ledger.events import CatalogueSwitched, PriceSwitch
from ledger.prices import Switched
from ledger.recorder import ConcurrencyError, Recorder

ATTEMPTS = 5  # other processes publishing at the same moment; each loses at most this often


class Published(msgspec.Struct, frozen=True):
    """What a publication did: the switches in force from now on, and the switch recorded (None:
    the catalogue was in force already, unchanged)."""

    switches: tuple[PriceSwitch, ...]
    recorded: Switched | None = None
    catalogues: tuple[Catalogue, ...] = ()  # each switch's catalogue (unchanged: the one in force), built on the way

    def summary(self) -> dict:
        """What `gateway admin reload-catalogue` prints."""
        return {"changed": self.recorded is not None, "price_version": self.switches[0].version,
                "switches": [{"price_version": s.version, "effective_from": instant(s.effective_from_us).isoformat()}
                             for s in self.switches]}


async def publish(recorder: Recorder, content: bytes, label: str, configured: Collection[str], *,
                  delay_s: float, clock: Callable[[], int] = wall_clock_us) -> Published:
    """Put the catalogue file `content` in force: `delay_s` after now, so every process has it
    by then (at once when none was in force), then at each change its own dates state. Raises
    CatalogueError (nothing recorded) when it does not validate or names an unconfigured provider.
    Catalogues are built in a thread: a large one takes a while."""
    digest = hashlib.sha256(content).hexdigest()
    for _ in range(ATTEMPTS):
        last = await prices.latest(recorder)
        if last is not None and last.event.sha256 == digest and (in_force := await asyncio.to_thread(
                _unchanged, last, configured, instant(clock()))):
            return Published(last.event.switches, catalogues=(in_force,))
        first = instant(clock() + (int(delay_s * 1e6) if last is not None else 0))
        completed, made = await asyncio.to_thread(_prepared, content, label, configured, last, first)
        event = CatalogueSwitched(sha256=digest, switches=tuple(s for s, _ in made), catalogue=completed)
        try:
            [recorded] = await prices.record(recorder, event, last.version if last else 0)
        except ConcurrencyError:
            continue  # another process published first: look again
        return Published(event.switches, prices.switched(recorded), tuple(c for _, c in made))
    raise ConcurrencyError(f"the prices stream kept moving: {ATTEMPTS} publications went first")


def _prepared(content: bytes, label: str, configured: Collection[str], last: Switched | None, first: datetime
              ) -> tuple[dict, list[tuple[PriceSwitch, Catalogue]]]:
    """The file with the prices in force carried over (`carried_over`), validated, as the event
    records it, and the switches it makes from `first` on."""
    previous = None if last is None else _published(last, first)
    completed = carried_over(content, previous, first)
    catalogue = Catalogue.parse(completed, label, first)
    catalogue.check_providers(configured)
    return msgspec.json.decode(completed), schedule(catalogue, first)


def _published(switched: Switched, at: datetime) -> Catalogue:
    return Catalogue.parse(prices.content(switched), "the catalogue in force", at)


def _unchanged(last: Switched, configured: Collection[str], now: datetime) -> Catalogue | None:
    """What `last` published, priced as now, if this code prices it as it was then (an upgrade may
    publish the same prices under another version); CatalogueError if it names an unconfigured
    provider."""
    switches = last.event.switches
    catalogue = _published(last, instant(switches[0].effective_from_us))
    catalogue.check_providers(configured)
    if any(catalogue.priced_at(instant(s.effective_from_us)).version != s.version for s in switches):
        return None
    return catalogue.priced_at(max(now, catalogue.at))


def carried_over(content: bytes, previous: Catalogue | None, first: datetime) -> bytes:
    """`content` with, for each provider entry whose prices take effect after `first` and state
    nothing before, the entry's prices in force in `previous` kept until then (its price_history):
    a price changed at a stated instant, and the price before it left to the catalogue in force."""
    try:
        document = msgspec.json.decode(content)
    except msgspec.DecodeError:
        return content  # the parse says what is wrong with it
    if previous is None or not isinstance(document, dict) or not isinstance(document.get("data"), list):
        return content
    carried = [_carry(record, entry, previous, first) for record in document["data"] if isinstance(record, dict)
               for entry in record.get("providers") or () if isinstance(entry, dict)]
    return msgspec.json.encode(document) if any(carried) else content


def _carry(record: dict, entry: dict, previous: Catalogue, first: datetime) -> bool:
    pricing = entry.get("pricing")
    if not isinstance(pricing, dict) or pricing.get("price_history") or not (starts := _instant(pricing)):
        return False
    old = previous.stated_pricing(str(record.get("id")), str(entry.get("providerId")), str(entry.get("modelName")),
                                  first) if starts > first else None
    if old is not None:
        pricing["price_history"] = [{**old, "effective_to": pricing["effective_from"]}]
    return old is not None


def _instant(pricing: dict) -> datetime | None:
    try:
        when = datetime.fromisoformat(pricing.get("effective_from"))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return when if when.tzinfo is not None else None


async def publish_configured(recorder: Recorder, config: Config, clock: Callable[[], int] = wall_clock_us
                             ) -> Published:
    """Publish the configured catalogue file (`[catalogue] path`, else the shipped one): at start-up,
    on SIGHUP and by `gateway admin reload-catalogue`."""
    path = config.catalogue.path or None
    return await publish(recorder, read(path), path or "the shipped catalogue", config.providers,
                         delay_s=config.catalogue.switch_delay_s, clock=clock)
