"""Which alerts an org's events raise for one endpoint: a pure function of the events and of the
org's money just before each (its balance, its keys' budgets and what they were charged), so the
same events always raise the same alerts under the same ids, however often they are read again.

An id names what raised the alert: the org, the version of the event in its stream, and the kind.
Refusals are the exception, one id per key, status and minute, so a client hammering a spent key
raises one alert a minute, not one per request. A receiver drops a repeated id (at least once).
"""

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import NamedTuple

import msgspec

from ledger import periods
from ledger.events import CreditsAdded, KeySpendLimitsSet, RequestCompleted, WebhookTestRequested
from ledger.money import format_amount, from_nano
from ledger.webhooks import Endpoint, Happened, Money

REFUSED = (402, 403)  # what a limit answers (credits, a budget, a model or an expiry)
US_PER_MINUTE = 60_000_000
US_PER_HOUR = 3_600_000_000


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


def raised(endpoint: Endpoint, org_id: str, standing: Standing, happened: Happened) -> list[Due]:
    """The alerts one event raises for the endpoint, judged on the money just before it."""
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
    return list(found)


def _due(org_id: str, happened: Happened, alert: str, data: dict, detail: str = "") -> Due:
    message = Message(message_id(org_id, happened.version, alert, detail), alert, instant(happened.at_us),
                      {"org_id": org_id, **data})
    return Due(message, happened.version)


def _credits(org_id: str, standing: Standing, happened: Happened, event: CreditsAdded) -> Due:
    return _due(org_id, happened, "credits.added", {
        "amount_inr": inr(event.amount_inr_nano), "note": event.note,
        "balance_inr": inr(standing.balance_inr_nano + event.amount_inr_nano)})


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
