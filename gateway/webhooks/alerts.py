"""Which alerts an org's events raise for one endpoint: a pure function of the events and of the
org's money just before each (its balance, its keys' budgets and what they were charged), so the
same events always raise the same alerts under the same ids, however often they are read again.

An id names what raised the alert: the org, the version of the event in its stream, and the kind.
Refusals are the exception, one id per key, status and minute, so a client hammering a spent key
raises one alert a minute, not one per request. A receiver drops a repeated id (at least once).

A batch's end (BatchEnded) raises batch.<its status>; its counts and cost are read off the batch's
row, which no event changes once the batch has ended, so they too are the same however often read.
"""

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import NamedTuple

import msgspec

from ledger import periods
from ledger.batch_queries import BatchRow
from ledger.events import BatchEnded, CreditsAdded, KeySpendLimitsSet, RequestCompleted, WebhookTestRequested
from ledger.money import format_amount, from_nano
from ledger.webhooks import Endpoint, Happened, Money

REFUSED = (402, 403)  # what a limit answers (credits, a budget, a model or an expiry)
US_PER_MINUTE = 60_000_000
US_PER_HOUR = 3_600_000_000
BATCH_ERRORS_SHOWN = 10  # a failed validation may name thousands of lines: the first few say why


class Message(msgspec.Struct, frozen=True):
    """A delivery's JSON body, as the Standard Webhooks convention has it."""

    id: str
    type: str
    created_at: str
    data: dict


class Due(NamedTuple):
    """A message to deliver, and the stream version its delivery moves the cursor to (0: none)."""

    message: Message
    version: int


def message_id(org_id: str, anchor: int | str, alert: str, detail: str = "") -> str:
    return "msg_" + ".".join(part for part in (org_id, str(anchor), alert, detail) if part)


def inr(nano: int) -> str:
    """An exact amount of INR as decimal text (never a float)."""
    return format_amount(from_nano(nano))


def instant(at_us: int) -> str:
    return datetime.fromtimestamp(at_us / 1_000_000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Standing:
    """An org's money at one version of its stream, moved forward or back one event at a time.

    Going back over a budget's change cannot know the budget before it, so events before the
    window's first change are judged against the budget the key has now."""

    def __init__(self, money: Money) -> None:
        self.balance_inr_nano = money.balance_inr_nano
        self.budgets = dict(money.budgets)
        self.charged = dict(money.charged)

    def undo(self, event: object, at_us: int) -> None:
        self._move(event, at_us, -1)

    def apply(self, event: object, at_us: int) -> None:
        self._move(event, at_us, 1)
        if isinstance(event, KeySpendLimitsSet):
            if event.budget_inr_nano is None:
                self.budgets.pop(event.key_id, None)
            else:
                self.budgets[event.key_id] = (event.budget_inr_nano, event.budget_period)

    def _move(self, event: object, at_us: int, sign: int) -> None:
        match event:
            case CreditsAdded(amount_inr_nano=amount):
                self.balance_inr_nano += sign * amount
            case RequestCompleted(charged_inr_nano=charged, key_id=key_id) if charged:
                self.balance_inr_nano -= sign * charged
                day = (key_id, periods.day_of(at_us))
                self.charged[day] = self.charged.get(day, 0) + sign * charged

    def spent(self, key_id: str, period: str, at_us: int) -> int:
        """What the key was charged in its budget's period holding `at_us`."""
        first = periods.first_day(period, at_us)
        return sum(amount for (key, day), amount in self.charged.items() if key == key_id and day >= first)


def raised(endpoint: Endpoint, org_id: str, standing: Standing, happened: Happened,
           batches: Mapping[str, BatchRow] | None = None) -> list[Due]:
    """The alerts one event raises for the endpoint, judged on the money just before it (and on
    `batches`, the ended batches the caller read, by id: see `wants_batches`)."""
    event, wants = happened.event, endpoint.alerts
    found: Iterable[Due] = ()
    match event:
        case CreditsAdded() if "credits.added" in wants:
            found = [_credits(org_id, standing, happened, event)]
        case RequestCompleted(status=status, attempts=(), charged_inr_nano=0) if status in REFUSED:
            found = [_refused(org_id, happened, event)] if "request.refused" in wants else []
        case RequestCompleted(charged_inr_nano=charged) if charged:
            found = [*_low(endpoint, org_id, standing, happened, event), *_budget(endpoint, org_id, standing, happened,
                                                                                   event)]
        case WebhookTestRequested(webhook_id=webhook_id) if webhook_id == endpoint.webhook_id:
            found = [_due(org_id, happened, "webhook.test", {"webhook_id": webhook_id})]
        case BatchEnded(status=status, batch_id=batch_id) if f"batch.{status}" in wants:
            found = [_batch_ended(org_id, happened, event, (batches or {}).get(batch_id))]
    return list(found)


def wants_batches(endpoint: Endpoint, window: Iterable[Happened]) -> list[str]:
    """The ids of the batches whose end in `window` raises an alert for the endpoint: the rows
    `raised` wants read for them."""
    return [h.event.batch_id for h in window
            if isinstance(h.event, BatchEnded) and f"batch.{h.event.status}" in endpoint.alerts]


def _due(org_id: str, happened: Happened, alert: str, data: dict, detail: str = "") -> Due:
    message = Message(message_id(org_id, happened.version, alert, detail), alert, instant(happened.at_us),
                      {"org_id": org_id, **data})
    return Due(message, happened.version)


def _credits(org_id: str, standing: Standing, happened: Happened, event: CreditsAdded) -> Due:
    return _due(org_id, happened, "credits.added", {
        "amount_inr": inr(event.amount_inr_nano), "note": event.note,
        "balance_inr": inr(standing.balance_inr_nano + event.amount_inr_nano)})


def _batch_ended(org_id: str, happened: Happened, event: BatchEnded, row: BatchRow | None) -> Due:
    """batch.<status>: the event's own fields, and the batch's counts and cost when its row was read."""
    data: dict[str, object] = {
        "batch_id": event.batch_id, "status": event.status, "output_file_id": event.output_file_id or None,
        "error_file_id": event.error_file_id or None, "ended_at": instant(happened.at_us),
        "errors": [{"code": e.code, "message": e.message, "line": e.line or None, "param": e.param or None}
                   for e in event.errors[:BATCH_ERRORS_SHOWN]], "error_count": len(event.errors)}
    if row is not None:
        data |= {"api": row.api, "endpoint": row.endpoint, "model": row.model, "created_at": instant(row.created_at_us),
                 "request_counts": {"total": row.lines, "completed": row.succeeded, "failed": row.failed},
                 "cost_inr": inr(row.charged_inr_nano)}
    return _due(org_id, happened, f"batch.{event.status}", data)


def _refused(org_id: str, happened: Happened, event: RequestCompleted) -> Due:
    minute = happened.at_us // US_PER_MINUTE
    message = Message(message_id(org_id, f"m{minute}", "request.refused", f"{event.key_id}.{event.status}"),
                      "request.refused", instant(happened.at_us), {
                          "org_id": org_id, "key_id": event.key_id, "request_id": event.request_id,
                          "status": event.status, "reason": event.error, "route": event.route, "model": event.model})
    return Due(message, happened.version)


def _low(endpoint: Endpoint, org_id: str, standing: Standing, happened: Happened,
         event: RequestCompleted) -> list[Due]:
    """balance.low when this charge takes the balance from at or above the threshold to below it."""
    low, before = endpoint.balance_low_inr_nano, standing.balance_inr_nano
    if low is None or "balance.low" not in endpoint.alerts or not before >= low > before - event.charged_inr_nano:
        return []
    return [_due(org_id, happened, "balance.low", {
        "balance_inr": inr(before - event.charged_inr_nano), "threshold_inr": inr(low),
        "request_id": event.request_id, "key_id": event.key_id})]


def _budget(endpoint: Endpoint, org_id: str, standing: Standing, happened: Happened,
            event: RequestCompleted) -> list[Due]:
    """key.budget for each percentage of the key's budget this charge reaches in its period."""
    budget = standing.budgets.get(event.key_id)
    if budget is None or "key.budget" not in endpoint.alerts or budget[0] <= 0:
        return []
    (amount, period), at = budget, happened.at_us
    before = standing.spent(event.key_id, period, at)
    after = before + event.charged_inr_nano
    reset = periods.next_reset_us(period, at)
    return [_due(org_id, happened, "key.budget", {
        "key_id": event.key_id, "percent": percent, "budget_inr": inr(amount), "spent_inr": inr(after),
        "period": period, "resets_at": None if reset is None else instant(reset), "request_id": event.request_id},
        detail=str(percent))
        for percent in endpoint.key_budget_percent if before * 100 < amount * percent <= after * 100]


def expiring(endpoint: Endpoint, org_id: str, keys: Iterable[tuple[str, int]]) -> list[Due]:
    """key.expiring for each key expiring within the endpoint's lead time (the caller finds them);
    timed from when it fell due, so a retry carries the same body."""
    lead = (endpoint.key_expiring_hours or 0) * US_PER_HOUR
    return [Due(Message(message_id(org_id, expires_at, "key.expiring", key_id), "key.expiring",
                        instant(max(expires_at - lead, endpoint.created_at_us)),
                        {"org_id": org_id, "key_id": key_id, "expires_at": instant(expires_at),
                         "hours": endpoint.key_expiring_hours}), 0)
            for key_id, expires_at in keys]
