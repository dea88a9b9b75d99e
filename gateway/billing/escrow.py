"""Escrow: a process reserves slices of credit ahead and admits requests against them in memory.

A synchronous hold costs every paid request a second commit. Instead each process holds a slice
of an org's available balance (key "") and of each budgeted key's room (key: the key id), as one
ledger hold (CreditsHeld, leased like any other), and admits a request when the slice's free part
(what the ledger holds for it less the worst cases of the requests it admitted) covers the
request's worst case: exact within the process, since only this process draws from its slices.
The request's record then draws its charge from the slice (RequestCompleted.draws) in the one
commit that records it; a request that ends unrecorded gives its worst case back in memory.

Slices refill in the background before they run dry, sized to `escrow_horizon_s` of the recent
demand and never above `escrow_share_percent` of what is available, so processes do not starve
each other; a slice too small to admit a few requests is not taken, so a small budget stays exact
through synchronous holds from any replica. An idle slice is returned; a dead process's slices
lapse with their leases (ledger.leases). A request that does not fit falls back to a synchronous
hold (gateway.billing.reservations).
"""

import asyncio
import random
import time
from typing import Protocol

import msgspec
import structlog

from gateway.billing.leases import HoldLeases
from gateway.config import BillingConfig
from gateway.accounts.directory import Directory
from gateway.accounts.keys import new_id
from ledger import queries
from ledger.events import SLICE_PREFIX, CreditsHeld, Draw, HoldReleased
from ledger.recorder import Append, BudgetExceeded, InsufficientCredit, LedgerError, Recorder
from ledger.writer import GroupCommitWriter

log = structlog.get_logger("gateway.billing.escrow")

FEWEST = 4  # a slice is taken only when it admits at least this many requests of the size asked
RETRY_S = 1.0  # how long a declined refill waits before the next try
REFILL_BELOW = 2  # refill when the free part falls under 1/REFILL_BELOW of the target


class Slice:
    """One slice: what the ledger holds for it (`held`, following its events) and what the
    requests it admitted may still cost (`reserved`). Mutated only on the event loop."""

    def __init__(self, org_id: str, key_id: str) -> None:
        self.org_id, self.key_id = org_id, key_id
        self.hold_id = new_id(SLICE_PREFIX.removesuffix("_"))  # how the ledger tells a slice from a request's hold
        self.held = self.reserved = 0
        self.live = True  # False once lost (its hold lapsed, or a commit's outcome is unknown)
        self.refill_after = 0.0  # a refill declined (too small, refused) is not tried again before this
        self.used_at = time.monotonic()
        self.demand = Demand()

    @property
    def free(self) -> int:
        """What it may still admit: all it holds but one nano-INR, the keel that keeps a draw from
        ever ending it (only a release ends a hold: ledger.recorder.plan)."""
        return self.held - self.reserved - 1


class Reservation(msgspec.Struct, frozen=True):
    """A request's worst case, admitted against a slice in memory."""

    slice: Slice
    amount_inr_nano: int


class Demand:
    """Worst cases admitted per second, smoothed: what a slice is sized to."""

    def __init__(self) -> None:
        self.second, self.this_second, self.per_second = int(time.monotonic()), 0, 0

    def add(self, amount: int, at: float) -> None:
        now = int(at)
        if now != self.second:  # a new second: fold the last one in (halving per second idle)
            self.per_second = (self.per_second + self.this_second) >> min(now - self.second, 62)
            self.second, self.this_second = now, 0
        self.this_second += amount


class SliceCounts(Protocol):
    """Where what happens to slices is counted (gateway.ops.metrics.Metrics)."""

    def observe_escrow(self, event: str) -> None: ...


class Escrow:
    """The slices of one process, by (org, key or "")."""

    def __init__(self, config: BillingConfig, writer: GroupCommitWriter, recorder: Recorder, directory: Directory,
                 leases: HoldLeases, metrics: SliceCounts) -> None:
        self._config, self._writer, self._recorder, self._directory = config, writer, recorder, directory
        self._leases, self._metrics = leases, metrics
        self._horizon_ms = int(config.escrow_horizon_s * 1000)
        self._slices: dict[tuple[str, str], Slice] = {}
        self._refills: dict[tuple[str, str], asyncio.Task] = {}

    def reserve(self, org_id: str, key_id: str, amount: int) -> Reservation | None:
        """Reserve `amount` in memory from the slice of (org, key: "" unless it has a budget), or
        None (it does not fit: the caller holds on its own); the slice refills in the background."""
        if not self._config.escrow:
            return None
        slot = (org_id, key_id)
        piece = self._slices.get(slot)
        if piece is None:
            piece = self._slices[slot] = Slice(org_id, key_id)
        piece.used_at = time.monotonic()
        piece.demand.add(amount, piece.used_at)
        admitted = piece.live and piece.free >= amount
        if admitted:
            piece.reserved += amount
        if piece.free * REFILL_BELOW < self._target(piece, amount):
            self._refill(slot, piece, amount)
        if not admitted:
            self._metrics.observe_escrow("fallback")
        return Reservation(piece, amount) if admitted else None

    def draws(self, reserved: list[Reservation], charge: int) -> tuple[Draw, ...]:
        """How a charge is paid from the request's reservations: each up to what it reserved, one
        draw per slice."""
        drawn: dict[str, Draw] = {}
        for reservation in reserved:
            piece = reservation.slice
            if (part := min(charge, reservation.amount_inr_nano)) > 0 and piece.live:
                before = drawn[piece.hold_id].amount_inr_nano if piece.hold_id in drawn else 0
                drawn[piece.hold_id] = Draw(hold_id=piece.hold_id, amount_inr_nano=before + part, key_id=piece.key_id)
                charge -= part
        return tuple(drawn.values())

    def settle(self, reserved: list[Reservation], draws: tuple[Draw, ...]) -> None:
        """After the commit that drew `draws`: the slices hold that much less, the worst cases end."""
        for reservation in reserved:
            reservation.slice.reserved -= reservation.amount_inr_nano
        pieces = {r.slice.hold_id: r.slice for r in reserved}
        for draw in draws:
            pieces[draw.hold_id].held -= draw.amount_inr_nano

    def give_back(self, reserved: list[Reservation]) -> None:
        """A request that ends without its record: its worst cases go back to their slices."""
        self.settle(reserved, ())

    def lose(self, reserved: list[Reservation]) -> None:
        """The ledger no longer holds these slices as we think (a lapsed lease, an unknown
        outcome): stop using them; whatever the ledger still holds lapses and is expired."""
        for reservation in reserved:
            self._forget(reservation.slice, "expired")

    def _forget(self, piece: Slice, why: str) -> None:
        if piece.live:
            piece.live = False
            self._leases.untrack(piece.hold_id)
            self._metrics.observe_escrow(why)
        if self._slices.get((piece.org_id, piece.key_id)) is piece:
            del self._slices[(piece.org_id, piece.key_id)]

    def _target(self, piece: Slice, amount: int) -> int:
        return max(piece.demand.per_second * self._horizon_ms // 1000, FEWEST * 2 * amount)

    async def _cap(self, piece: Slice) -> int:
        """The most one slice may take: its share of what the org has available and, for a key's
        slice, of what the key's budget has room for."""
        account = self._directory.account(piece.org_id)
        available = account.available_inr_nano if account else 0
        if piece.key_id and (room := await queries.key_room(self._recorder, piece.key_id, self._recorder.clock())
                             ) is not None:
            available = min(available, room)
        return max(available, 0) * self._config.escrow_share_percent // 100

    def _refill(self, slot: tuple[str, str], piece: Slice, amount: int) -> None:
        if slot in self._refills or not piece.live or piece.used_at < piece.refill_after:
            return
        task = asyncio.create_task(self._top_up(piece, amount), name=f"escrow-{piece.hold_id}")
        self._refills[slot] = task
        task.add_done_callback(lambda _: self._refills.pop(slot, None))

    async def _top_up(self, piece: Slice, amount: int) -> None:
        """Hold more for the slice: up to its target, within the share of what is available."""
        try:
            want = min(self._target(piece, amount) - piece.free, await self._cap(piece))
            if want < FEWEST * amount:  # too small to be worth a slice: requests hold on their own, exactly
                piece.refill_after = time.monotonic() + RETRY_S
                return
            await self._hold(piece, want)
        except (InsufficientCredit, BudgetExceeded, LedgerError) as exc:  # others took it first
            piece.refill_after = time.monotonic() + RETRY_S
            log.info("escrow_refill_refused", org_id=piece.org_id, key_id=piece.key_id, error=str(exc)[:200])

    async def _hold(self, piece: Slice, amount: int) -> None:
        lease_us = int(self._config.hold_lease_s * 1_000_000)
        hold = CreditsHeld(hold_id=piece.hold_id, request_id="", amount_inr_nano=amount, key_id=piece.key_id,
                           lease_us=lease_us)
        first = piece.held == 0

        async def held_then_noted() -> None:  # what the slice holds must follow the ledger, cancelled or not
            await self._writer.append(Append(piece.org_id, [hold]))
            piece.held += amount
            self._leases.track(piece.org_id, piece.hold_id)
            self._metrics.observe_escrow("taken" if first else "refilled")

        await asyncio.shield(asyncio.ensure_future(held_then_noted()))

    async def settled(self) -> None:
        """Once the refills under way have ended (their holds recorded or refused)."""
        while self._refills:
            await asyncio.wait(set(self._refills.values()))

    async def return_idle(self, idle_s: float | None = None) -> None:
        """Return the slices no request used for `idle_s` (all of them: None and 0 at shutdown)."""
        cutoff = time.monotonic() - (self._config.escrow_idle_s if idle_s is None else idle_s)
        idle = [s for slot, s in self._slices.items()
                if s.reserved == 0 and s.used_at <= cutoff and slot not in self._refills]
        for piece in idle:
            await self._return(piece)

    async def _return(self, piece: Slice) -> None:
        self._forget(piece, "returned")
        if piece.held > 0:
            released = HoldReleased(hold_id=piece.hold_id, amount_inr_nano=piece.held, key_id=piece.key_id)
            try:
                await self._writer.append(Append(piece.org_id, [released]))
            except LedgerError as exc:  # it lapses and is expired instead
                log.info("escrow_return_failed", hold_id=piece.hold_id, error=str(exc)[:200])

    async def maintain(self) -> None:
        """For ever: renew this process's leases, expire lapsed holds (anyone's), return idle
        slices; every third of a lease at most, jittered so replicas rarely race for one hold."""
        period = min(self._config.hold_lease_s / 3, self._config.escrow_idle_s)
        while True:
            await asyncio.sleep(period * random.uniform(0.6, 0.9))
            try:
                await self._leases.renew()
                await self._leases.expire()
                await self.return_idle()
            except Exception:  # logged with its traceback, not hidden: the next turn must still come
                log.exception("holds_upkeep_failed")

    async def close(self) -> None:
        """At shutdown: stop refilling, return every slice no request still uses."""
        for task in list(self._refills.values()):
            task.cancel()
        await asyncio.gather(*self._refills.values(), return_exceptions=True)
        await self.return_idle(0)


def reserved_total(reserved: list[Reservation]) -> int:
    return sum(r.amount_inr_nano for r in reserved)

