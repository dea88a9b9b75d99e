"""Recording, off the requests' path, what a request could not record itself: the release of the
holds of a request that ended without its record, and a record whose commit is in doubt.

A request's record releases what it held in the same unit as its charge. One that ends without
it (its client gone before a whole answer, a bug, or the ledger away when it was to be recorded)
hands its holds here: they are released in the background, retried while the ledger is away
(the usual reason a record failed), so the client's answer never waits on a database that is
not there, and a short outage leaves nothing held.

The release is recorded with the request itself (uncharged), so it happens at most once: a
record whose commit timed out may still have committed, releasing the holds with it, and the
ledger then refuses the second record of that request id, and its release with it. A hold that
lapsed meanwhile was expired by whoever saw it (ledger.leases): the record goes in without it.

A record whose COMMIT got no answer (CommitInDoubt) stands: its request was answered as charged,
and the same unit is appended again until the ledger takes it, or refuses it because the first
commit took it after all. Either way the request is charged once.
"""

import asyncio
import time
from collections.abc import Sequence

import msgspec
import structlog

from ledger.events import CreditsHeld, Event, HoldReleased, RequestCompleted
from ledger.recorder import Append, AppendRejected, HoldNotHeld, LedgerUnavailable
from ledger.writer import GroupCommitWriter

log = structlog.get_logger("gateway.billing.releases")


class Releases:
    """Background releases, each a task kept here until it ends (closed before the writer)."""

    def __init__(self, writer: GroupCommitWriter, *, retry_s: float = 1.0, give_up_s: float = 600.0) -> None:
        self._writer, self._retry_s, self._give_up_s = writer, retry_s, give_up_s
        self._running: set[asyncio.Task] = set()

    def release(self, org_id: str, holds: Sequence[CreditsHeld], record: RequestCompleted) -> None:
        """End `holds` (all of them), recorded with the request's `record`, as soon as the ledger
        takes them; nothing when the request was recorded after all."""
        self._start(Append(org_id, [*(hold.released() for hold in holds), record]), record.request_id, "release")

    def keep(self, unit: Append, request_id: str) -> None:
        """Append `unit` (a request's record, whose commit is in doubt) until the ledger takes it
        or shows it took it already."""
        self._start(unit, request_id, "record")

    def _start(self, unit: Append, request_id: str, what: str) -> None:
        task = asyncio.create_task(self._append(unit, request_id), name=f"{what}-{request_id}")
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def settled(self) -> None:
        """Wait for every release under way (tests, and shutdown)."""
        while self._running:
            await asyncio.wait(set(self._running))

    async def close(self) -> None:
        """At shutdown: releases still waiting for the ledger stop, each logged as not released."""
        for task in self._running:
            task.cancel()
        await asyncio.gather(*self._running, return_exceptions=True)

    async def _append(self, unit: Append, request_id: str) -> None:
        give_up = time.monotonic() + self._give_up_s
        while True:
            try:
                await self._writer.append(unit)
                return
            except AppendRejected:  # the request was recorded, its holds released with it
                log.info("recorded_already", org_id=unit.stream_id, request_id=request_id)
                return
            except HoldNotHeld:  # one lapsed while the ledger was away, and was expired: the record alone
                unit = without_holds(unit)
            except LedgerUnavailable as exc:
                if time.monotonic() >= give_up:
                    _not_released(unit, request_id, exc)
                    return
                await asyncio.sleep(self._retry_s)
            except asyncio.CancelledError:
                _not_released(unit, request_id, "the gateway stopped")
                raise


def _not_released(unit: Append, request_id: str, why: object) -> None:
    held = sum(e.amount_inr_nano for e in unit.events if isinstance(e, HoldReleased))
    charged = sum(e.charged_inr_nano for e in unit.events if isinstance(e, RequestCompleted))
    log.warning("charge_not_recorded" if charged else "holds_not_released", org_id=unit.stream_id,
                request_id=request_id, held_inr_nano=held, charged_inr_nano=charged, error=str(why)[:300])


def without_holds(unit: Append) -> Append:
    """`unit` once its holds lapsed and were expired: no releases, the record drawing from none."""
    events = [lapsed(e) for e in unit.events if not isinstance(e, HoldReleased)]
    return msgspec.structs.replace(unit, events=events)


def lapsed(event: Event) -> Event:
    """A record whose hold lapsed before it was recorded: charged all the same, without drawing on
    the hold, and the anomaly noted."""
    if not isinstance(event, RequestCompleted) or not (event.draws or event.charged_inr_nano):
        return event
    why = "its hold lapsed before it was recorded (its process was away longer than a lease)"
    return msgspec.structs.replace(event, draws=(), anomaly=f"{event.anomaly}; {why}" if event.anomaly else why)
