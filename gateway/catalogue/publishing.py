"""Putting a catalogue file in force across a deployment: validated, then recorded in the prices
stream (ledger.prices) for every process to follow. A gateway does it at start-up and on SIGHUP,
`gateway admin reload-catalogue` from anywhere; a file that does not validate is refused with
the reason, and nothing is recorded.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable, Collection

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
    catalogues: tuple[Catalogue, ...] = ()  # each switch's catalogue, built on the way

    def summary(self) -> dict:
        """What `gateway admin reload-catalogue` prints."""
        return {"changed": self.recorded is not None, "price_version": self.switches[0].version,
                "switches": [{"price_version": s.version, "effective_from": instant(s.effective_from_us).isoformat()}
                             for s in self.switches]}


async def publish(recorder: Recorder, content: bytes, label: str, configured: Collection[str], *,
                  delay_s: float, clock: Callable[[], int] = wall_clock_us) -> Published:
    """Put the catalogue file `content` in force: `delay_s` after now, so every process has it
    by then (at once when none was in force), then at each change its own dates state. Raises
    CatalogueError (nothing recorded) when it does not validate or names an unconfigured provider."""
    catalogue = await asyncio.to_thread(_validated, content, label, configured)  # a large one takes a while
    digest = hashlib.sha256(content).hexdigest()
    for _ in range(ATTEMPTS):
        last = await prices.latest(recorder)
        if last is not None and await asyncio.to_thread(_in_force, last, digest, catalogue):
            return Published(last.event.switches)
        first = clock() + (int(delay_s * 1e6) if last is not None else 0)
        made = await asyncio.to_thread(schedule, catalogue, instant(first))
        event = CatalogueSwitched(sha256=digest, switches=tuple(s for s, _ in made), catalogue=msgspec.Raw(content))
        try:
            [recorded] = await prices.record(recorder, event, last.version if last else 0)
        except ConcurrencyError:
            continue  # another process published first: look again
        return Published(event.switches, prices.switched(recorded), tuple(c for _, c in made))
    raise ConcurrencyError(f"the prices stream kept moving: {ATTEMPTS} publications went first")


def _validated(content: bytes, label: str, configured: Collection[str]) -> Catalogue:
    catalogue = Catalogue.parse(content, label)
    catalogue.check_providers(configured)
    return catalogue


def _in_force(last: Switched, digest: str, catalogue: Catalogue) -> bool:
    """Whether `last` published this very file, priced as this code prices it."""
    return last.event.sha256 == digest and all(
        catalogue.priced_at(instant(s.effective_from_us)).version == s.version for s in last.event.switches)


async def publish_configured(recorder: Recorder, config: Config, clock: Callable[[], int] = wall_clock_us
                             ) -> Published:
    """Publish the configured catalogue file (`[catalogue] path`, else the shipped one): at start-up,
    on SIGHUP and by `gateway admin reload-catalogue`."""
    path = config.catalogue.path or None
    return await publish(recorder, read(path), path or "the shipped catalogue", config.providers,
                         delay_s=config.catalogue.switch_delay_s, clock=clock)
