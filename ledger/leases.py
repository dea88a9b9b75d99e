"""Holds whose lease lapsed: released as events (expired, not charged) by whoever sees them.

A hold (ledger.events.CreditsHeld) lapses `lease_us` after it was recorded or last renewed
(HoldsRenewed), which the process holding it does while its requests run. A process killed
mid-request renews nothing, so its holds lapse and any gateway process or the sweeper releases
them here. Many may try at once: the ledger takes an expiry only while the hold is lapsed and
only for all it still holds (ledger.recorder.plan), so it ends exactly once.
"""

from typing import NamedTuple

import structlog

from ledger.events import HoldReleased
from ledger.recorder import Append, HoldNotHeld, LedgerError, Recorder

log = structlog.get_logger("ledger.leases")

LAPSED = ("SELECT org_id, hold_id, key_id, amount_inr_nano FROM holds WHERE lapses_at_us <= ?"
          " ORDER BY lapses_at_us LIMIT ?")
HELD = "SELECT org_id, hold_id, key_id, amount_inr_nano FROM holds WHERE hold_id = ?"


class Lapsed(NamedTuple):
    org_id: str
    hold_id: str
    key_id: str
    amount_inr_nano: int

    def release(self) -> HoldReleased:
        """The end of what remains of this hold, by its holder (a batch that ended)."""
        return HoldReleased(hold_id=self.hold_id, amount_inr_nano=self.amount_inr_nano, key_id=self.key_id)

    def expiry(self) -> Append:
        """The unit that ends this hold, whole."""
        return Append(self.org_id, [HoldReleased(hold_id=self.hold_id, amount_inr_nano=self.amount_inr_nano,
                                                 key_id=self.key_id, expired=True)])


async def lapsed(recorder: Recorder, now_us: int, limit: int = 1000) -> list[Lapsed]:
    """Up to `limit` holds whose lease lapsed by `now_us`, the longest lapsed first."""
    return [Lapsed(*row) for row in await recorder._fetch(LAPSED, (now_us, limit))]


async def held(recorder: Recorder, hold_id: str) -> Lapsed | None:
    """A hold still held (whether lapsed or not), or None."""
    rows = await recorder._fetch(HELD, (hold_id,))
    return Lapsed(*rows[0]) if rows else None


async def expire(recorder: Recorder, now_us: int | None = None, limit: int = 1000) -> int:
    """Release every hold lapsed by now (the recorder's clock); how many this call released. A
    hold another process expired first, or that its holder renewed meanwhile, is left alone."""
    due = await lapsed(recorder, recorder.clock() if now_us is None else now_us, limit)
    outcomes = await recorder.append([hold.expiry() for hold in due]) if due else []
    released = 0
    for hold, outcome in zip(due, outcomes, strict=True):
        if isinstance(outcome, HoldNotHeld):
            continue  # ended by another, or renewed
        if isinstance(outcome, LedgerError):
            raise outcome
        released += 1
        log.info("hold_expired", org_id=hold.org_id, hold_id=hold.hold_id, amount_inr_nano=hold.amount_inr_nano)
    return released
