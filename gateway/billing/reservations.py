"""Reserve, then settle: a paid request holds its worst case before its upstream call.

The hold is checked inside the ledger's write transaction against the organization's available
balance (credits - spent - held) and, for a key with a budget, against the budget's room in its
period (budget - charged in the period - held), on SQLite and on PostgreSQL alike, so requests
racing on any number of replicas can never take either below zero. The request's own record
(`charging.commit`) releases its holds in the same unit as its charge, and never charges more
than they held. Holds ride the group-commit writer: under load they share their batch's fsync.

With `[billing] reserve = false` only a key with a budget holds; other requests are checked
against the org's balance (above zero) as before, and may overspend it by the requests in flight.
"""

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime

import msgspec

from gateway.billing.charging import Outcome, appended, held, refused, request_event, require_credit
from gateway.catalogue import Resolved
from gateway.accounts.directory import SpendLimits
from gateway.edge.errors import ApiError
from gateway.accounts.keys import new_id
from gateway.services import Caller, Services
from ledger import periods
from ledger.events import CreditsHeld, Event
from ledger.money import format_amount, from_nano
from ledger.recorder import Append, BudgetExceeded, InsufficientCredit, LedgerError, LedgerUnavailable


def holds(services: Services, caller: Caller) -> bool:
    """Whether the caller's paid requests hold their worst case (see the module doc)."""
    return services.config.billing.reserve or services.directory.spend_limits(caller.principal.key_id) \
        .budget_inr_nano is not None


async def cover(services: Services, caller: Caller, route: str, model: Resolved, amount_inr_nano: int,
                also: Sequence[Event] = ()) -> None:
    """Hold what the request lacks of `amount_inr_nano` (with `also` in the same unit). A request
    that does not fit is recorded (not charged) and refused: 402 naming the limit."""
    try:
        await top_up(services, caller, amount_inr_nano, also)
    except ApiError as error:
        raise await refused(services, caller, route, model, error) from None


async def top_up(services: Services, caller: Caller, amount_inr_nano: int, also: Sequence[Event] = ()) -> None:
    """`cover`, the refusal (402) raised and not recorded: for a request that goes on (a realtime
    session refusing one response) and is recorded when it ends."""
    if not services.writer.available:  # refused up front, even when a slice could admit it
        raise LedgerUnavailable("the ledger is away: its last commit failed, or one is stuck")
    short = amount_inr_nano - held(caller)
    if not holds(services, caller):
        require_credit(services, caller)
    elif short > 0 and (reservation := services.escrow.reserve(caller.org_id, slice_key(services, caller), short)):
        caller.reserved.append(reservation)
    elif short > 0:
        await _hold(services, caller, short, also)
        return
    if also:
        await services.writer.append(Append(caller.org_id, list(also)))


def slice_key(services: Services, caller: Caller) -> str:
    """Whose escrow slice a request is admitted against: its key's, when the key has a budget
    (the slice holds the budget's room too), else its org's ("")."""
    key_id = caller.principal.key_id
    return key_id if services.directory.spend_limits(key_id).budget_inr_nano is not None else ""


async def _hold(services: Services, caller: Caller, amount: int, also: Sequence[Event]) -> None:
    account = services.directory.account(caller.org_id)
    if account is None or account.available_inr_nano < amount:  # the local view spares a doomed write
        raise org_short()
    hold = CreditsHeld(hold_id=new_id("hold"), request_id=caller.request_id, amount_inr_nano=amount,
                       key_id=caller.principal.key_id, lease_us=services.leases.lease_us)

    def held_and_leased() -> None:
        caller.holds.append(hold)
        services.leases.track(caller.org_id, hold.hold_id)

    try:
        await appended(services, Append(caller.org_id, [*also, hold]), held_and_leased)
    except InsufficientCredit:
        raise org_short() from None
    except BudgetExceeded as exc:
        limits = services.directory.spend_limits(hold.key_id)
        raise budget_short(limits, exc.room_inr_nano, amount, services.recorder.clock()) from None


async def shrink(services: Services, caller: Caller, keep_inr_nano: int) -> None:
    """Release what the request holds beyond `keep_inr_nano` (a realtime session, after a
    response): from its escrow reservations first (in memory), then its own holds."""
    excess = held(caller) - keep_inr_nano
    while excess > 0 and caller.reserved:
        excess -= _shrink_reserved(services, caller, excess)
    if excess <= 0 or not caller.holds:
        return
    last = caller.holds[-1]
    part = min(excess, last.amount_inr_nano)

    def shrunk() -> None:
        if part == last.amount_inr_nano:
            caller.holds.pop()
            services.leases.untrack(last.hold_id)
        else:
            caller.holds[-1] = msgspec.structs.replace(last, amount_inr_nano=last.amount_inr_nano - part)

    await appended(services, Append(caller.org_id, [last.released(part)]), shrunk)
    await shrink(services, caller, keep_inr_nano)


def _shrink_reserved(services: Services, caller: Caller, excess: int) -> int:
    """Give back up to `excess` of the last escrow reservation; how much."""
    last = caller.reserved.pop()
    part = min(excess, last.amount_inr_nano)
    services.escrow.give_back([msgspec.structs.replace(last, amount_inr_nano=part)])
    if part < last.amount_inr_nano:
        caller.reserved.append(msgspec.structs.replace(last, amount_inr_nano=last.amount_inr_nano - part))
    return part


def release_all(services: Services, caller: Caller, route: str, ended_by: BaseException | None) -> None:
    """Give what a request reserved in escrow back to its slices, and hand what it holds on its
    own as it ends without its record (its client gone before a whole answer, a bug, the ledger
    away) to the background releases (gateway.billing.releases), with the record it lacks:
    uncharged, its status what ended it (`ended_by`)."""
    services.escrow.give_back(caller.reserved)
    caller.reserved.clear()
    if not caller.holds:
        return
    for hold in caller.holds:
        services.leases.untrack(hold.hold_id)
    facts = caller.facts
    ended = Outcome(route=route, model=facts.model or "", provider=facts.provider or "", status=ended_status(ended_by),
                    error="the request ended before it was recorded; nothing was charged")
    services.releases.release(caller.org_id, list(caller.holds), request_event(caller, ended))
    caller.holds.clear()


def ended_status(exc: BaseException | None) -> int:
    """The status of a request that ended without its record, by what ended it."""
    match exc:
        case asyncio.CancelledError() | ConnectionError():
            return 499  # the client left
        case ApiError(status=status):
            return status
        case LedgerError():
            return 503
    return 500


def org_short() -> ApiError:
    return ApiError(402, "insufficient credits: the organization's available balance (its balance less what"
                         " running requests hold) does not cover this request's worst case; add credits"
                         " or lower max_tokens", type="insufficient_credits", code="insufficient_credits",
                    extra={"limit": "org_balance"})


def budget_short(limits: SpendLimits, room_inr_nano: int, wanted_inr_nano: int, now_us: int) -> ApiError:
    """402 for a key whose budget has no room for the request, naming when its period resets."""
    reset = periods.next_reset_us(limits.budget_period, now_us)
    budget = format_amount(from_nano(limits.budget_inr_nano or 0))
    period = {"day": "per UTC day", "month": "per calendar month", "total": "in total"}[limits.budget_period]
    when = (f"; it resets at {datetime.fromtimestamp(reset / 1e6, UTC).strftime('%Y-%m-%dT%H:%M:%SZ')}"
            if reset is not None else "; it does not reset")
    return ApiError(402, f"key budget exceeded: this key may spend {budget} INR {period}, and"
                         f" {format_amount(from_nano(max(room_inr_nano, 0)))} INR of it is left, less than this"
                         f" request's worst case of {format_amount(from_nano(wanted_inr_nano))} INR{when}",
                    type="insufficient_credits", code="key_budget_exceeded",
                    extra={"limit": "key_budget", "resets_at": None if reset is None else reset // 1_000_000})
