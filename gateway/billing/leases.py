"""Keeping this process's holds alive, and ending other processes' lapsed ones.

Every hold carries a lease (ledger.events.CreditsHeld.lease_us). While a request or an escrow
slice holds credit, this process renews the lease every third of it, one HoldsRenewed event per
org, so a request outliving several leases (music waits up to 240 s, a realtime session lasts
hours) keeps its hold. A process killed mid-request renews nothing: its holds lapse and any
process, this one included, releases them (ledger.leases.expire), so the org and key get their
credit back within a lease plus one expiry pass.
"""

import asyncio
from typing import Protocol

import structlog

from ledger import leases
from ledger.events import HoldsRenewed
from ledger.recorder import Append, LedgerError, Recorder
from ledger.writer import GroupCommitWriter

log = structlog.get_logger("gateway.billing.leases")


class ExpiryCounts(Protocol):
    """Where the lapsed holds this process released are counted (gateway.ops.metrics.Metrics)."""

    def observe_expired(self, count: int) -> None: ...


class HoldLeases:
    """The holds this process holds, by org, renewed while they last."""

    def __init__(self, writer: GroupCommitWriter, recorder: Recorder, lease_s: float, metrics: ExpiryCounts) -> None:
        self._writer, self._recorder, self._metrics = writer, recorder, metrics
        self.lease_us = int(lease_s * 1_000_000)
        self._held: dict[str, str] = {}  # hold id -> org id

    def track(self, org_id: str, hold_id: str) -> None:
        self._held[hold_id] = org_id

    def untrack(self, hold_id: str) -> None:
        self._held.pop(hold_id, None)

    async def renew(self) -> None:
        """One HoldsRenewed per org for every hold still tracked; a failure waits for the next turn
        (a third of a lease later, so one missed turn loses nothing)."""
        by_org: dict[str, list[str]] = {}
        for hold_id, org_id in self._held.items():
            by_org.setdefault(org_id, []).append(hold_id)
        units = [Append(org, [HoldsRenewed(hold_ids=tuple(ids), lease_us=self.lease_us)])
                 for org, ids in by_org.items()]
        results = await asyncio.gather(*(self._writer.append(unit) for unit in units), return_exceptions=True)
        for unit, result in zip(units, results, strict=True):
            if isinstance(result, LedgerError):
                log.warning("holds_not_renewed", org_id=unit.stream_id, error=str(result)[:200])
            elif isinstance(result, BaseException):
                raise result

    async def expire(self) -> None:
        """Release every lapsed hold, whoever held it."""
        try:
            self._metrics.observe_expired(await leases.expire(self._recorder))
        except LedgerError as exc:
            log.warning("holds_not_expired", error=str(exc)[:200])
