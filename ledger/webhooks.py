"""Webhook endpoints as the ledger keeps them: how their events change the `webhooks` and
`webhook_deliveries` tables (ledger.projections runs these, in the LOG phase so a batch applies
them in log order, as a replay in other batches does), and the SQL that reads them.

Every statement names the stream's own org, so one org's events never touch another's endpoint.
"""

from typing import NamedTuple

from ledger.events import (
    Event, WebhookAttempted, WebhookDisabled, WebhookPassed, WebhookRemoved, WebhookSet, decode_event,
)
from ledger.recorder import Recorded, Recorder

# A new endpoint's cursor is the version of its first WebhookSet: alerts come from what follows.
# A change keeps the cursor and starts its failures afresh (an admin acted: try again now).
SET_WEBHOOK = (
    "INSERT INTO webhooks (webhook_id, org_id, url, alerts, balance_low_inr_nano, key_budget_percent,"
    " key_expiring_hours, enabled, disabled_reason, created_at_us, cursor_version, attempts, failing_since_us,"
    " retry_at_us) VALUES (?, ?, ?, ?, ?, ?, ?, ?, '', ?, ?, 0, NULL, 0) ON CONFLICT (webhook_id) DO UPDATE SET"
    " url = excluded.url, alerts = excluded.alerts, balance_low_inr_nano = excluded.balance_low_inr_nano,"
    " key_budget_percent = excluded.key_budget_percent, key_expiring_hours = excluded.key_expiring_hours,"
    " enabled = excluded.enabled, disabled_reason = '', attempts = 0, failing_since_us = NULL, retry_at_us = 0"
    " WHERE webhooks.org_id = excluded.org_id")
REMOVE_WEBHOOK = "DELETE FROM webhooks WHERE webhook_id = ? AND org_id = ?"
REMOVE_DELIVERIES = "DELETE FROM webhook_deliveries WHERE webhook_id = ? AND org_id = ?"
LOG_ATTEMPT = (
    "INSERT INTO webhook_deliveries (position, webhook_id, org_id, message_id, alert, attempt, status, delivered,"
    " error, latency_ms, at_us) SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?"
    " WHERE EXISTS (SELECT 1 FROM webhooks WHERE webhook_id = ? AND org_id = ?)")
# Parameters: delivered, upto_version (twice), delivered, delivered, at, delivered, retry_at, id, org.
COUNT_ATTEMPT = (
    "UPDATE webhooks SET cursor_version = CASE WHEN ? = 1 AND ? > cursor_version THEN ? ELSE cursor_version END,"
    " attempts = CASE WHEN ? = 1 THEN 0 ELSE attempts + 1 END,"
    " failing_since_us = CASE WHEN ? = 1 THEN NULL ELSE COALESCE(failing_since_us, ?) END,"
    " retry_at_us = CASE WHEN ? = 1 THEN 0 ELSE ? END WHERE webhook_id = ? AND org_id = ?")
PASS = "UPDATE webhooks SET cursor_version = ? WHERE webhook_id = ? AND org_id = ? AND cursor_version < ?"
DISABLE = "UPDATE webhooks SET enabled = 0, disabled_reason = ? WHERE webhook_id = ? AND org_id = ?"


def changes(recorded: Recorded) -> list[tuple[str, tuple]]:
    """The statements one webhook event runs (none for any other event)."""
    org, at = recorded.stream_id, recorded.recorded_at_us
    match recorded.event:
        case WebhookSet() as e:
            return [(SET_WEBHOOK, (e.webhook_id, org, e.url, ",".join(e.alerts), e.balance_low_inr_nano,
                                   ",".join(map(str, e.key_budget_percent)), e.key_expiring_hours, int(e.enabled),
                                   at, recorded.version))]
        case WebhookRemoved(webhook_id=webhook_id):
            return [(REMOVE_DELIVERIES, (webhook_id, org)), (REMOVE_WEBHOOK, (webhook_id, org))]
        case WebhookAttempted() as e:
            done = int(e.delivered)
            return [(LOG_ATTEMPT, (recorded.position, e.webhook_id, org, e.message_id, e.alert, e.attempt, e.status,
                                   done, e.error, e.latency_ms, at, e.webhook_id, org)),
                    (COUNT_ATTEMPT, (done, e.upto_version, e.upto_version, done, done, at, done, e.retry_at_us,
                                     e.webhook_id, org))]
        case WebhookPassed(webhook_id=webhook_id, upto_version=upto):
            return [(PASS, (upto, webhook_id, org, upto))]
        case WebhookDisabled(webhook_id=webhook_id, reason=reason):
            return [(DISABLE, (reason, webhook_id, org))]
    return []


class Endpoint(NamedTuple):
    """One row of `webhooks`, its lists split."""

    webhook_id: str
    org_id: str
    url: str
    alerts: tuple[str, ...]
    balance_low_inr_nano: int | None
    key_budget_percent: tuple[int, ...]
    key_expiring_hours: int | None
    enabled: bool
    disabled_reason: str
    created_at_us: int
    cursor_version: int
    attempts: int
    failing_since_us: int | None
    retry_at_us: int

    @classmethod
    def of(cls, row: tuple) -> "Endpoint":
        alerts = tuple(row[3].split(",")) if row[3] else ()
        percent = tuple(int(p) for p in row[5].split(",")) if row[5] else ()
        return cls(row[0], row[1], row[2], alerts, row[4], percent, row[6], bool(row[7]), *row[8:])


class Attempt(NamedTuple):
    """One row of `webhook_deliveries`."""

    position: int
    message_id: str
    alert: str
    attempt: int
    status: int
    delivered: bool
    error: str
    latency_ms: int
    at_us: int


COLUMNS = ("webhook_id, org_id, url, alerts, balance_low_inr_nano, key_budget_percent, key_expiring_hours, enabled,"
           " disabled_reason, created_at_us, cursor_version, attempts, failing_since_us, retry_at_us")
OF_ORG = f"SELECT {COLUMNS} FROM webhooks WHERE org_id = ? ORDER BY created_at_us, webhook_id"
ONE = f"SELECT {COLUMNS} FROM webhooks WHERE webhook_id = ? AND org_id = ?"
# The endpoints with something to do: enabled, not waiting for a retry, and either behind their
# org's stream or wanting key expiries (which come with time, not with events). The head is the
# stream's newest version, one index probe per endpoint.
DUE = (f"SELECT {COLUMNS}, (SELECT MAX(version) FROM events e WHERE e.stream_id = w.org_id) AS head"
       " FROM webhooks w WHERE enabled = 1 AND retry_at_us <= ? AND webhook_id > ? ORDER BY webhook_id LIMIT ?")
RECENT = ("SELECT position, message_id, alert, attempt, status, delivered, error, latency_ms, at_us"
          " FROM webhook_deliveries WHERE webhook_id = ? AND org_id = ? AND position < ?"
          " ORDER BY position DESC LIMIT ?")
DELIVERED = "SELECT message_id FROM webhook_deliveries WHERE webhook_id = ? AND delivered = 1 AND message_id IN ({})"


async def of_org(recorder: Recorder, org_id: str) -> list[Endpoint]:
    return [Endpoint.of(row) for row in await recorder._fetch(OF_ORG, (org_id,))]


async def one(recorder: Recorder, org_id: str, webhook_id: str) -> Endpoint | None:
    rows = await recorder._fetch(ONE, (webhook_id, org_id))
    return Endpoint.of(rows[0]) if rows else None


async def due(recorder: Recorder, now_us: int, after: str = "", limit: int = 1000) -> list[tuple[Endpoint, int]]:
    """Up to `limit` endpoints that may have something to deliver (by id, after `after`), each with
    its org stream's head."""
    return [(Endpoint.of(row[:-1]), row[-1] or 0) for row in await recorder._fetch(DUE, (now_us, after, limit))]


async def recent(recorder: Recorder, org_id: str, webhook_id: str, before: int = 2**63 - 1,
                 limit: int = 20) -> list[Attempt]:
    """An endpoint's latest delivery attempts, newest first."""
    rows = await recorder._fetch(RECENT, (webhook_id, org_id, before, limit))
    return [Attempt(row[0], row[1], row[2], row[3], row[4], bool(row[5]), *row[6:]) for row in rows]


async def delivered(recorder: Recorder, webhook_id: str, message_ids: list[str]) -> set[str]:
    """Which of these messages the endpoint has had."""
    if not message_ids:
        return set()
    sql = DELIVERED.format(", ".join("?" * len(message_ids)))
    return {row[0] for row in await recorder._fetch(sql, (webhook_id, *message_ids))}


# What alerts are judged against (gateway.webhooks.alerts): an org's balance, its keys' budgets
# and what each key with one was charged each day, and its stream's events in version order.
BALANCE = "SELECT credits_inr_nano - spent_inr_nano FROM orgs WHERE org_id = ?"
BUDGETS = ("SELECT key_id, budget_inr_nano, budget_period FROM key_budgets"
           " WHERE org_id = ? AND budget_inr_nano IS NOT NULL")
BUDGETED_DAYS = (
    "SELECT s.key_id, s.day, s.charged_inr_nano FROM key_spend_daily s JOIN key_budgets b"
    " ON b.key_id = s.key_id AND b.org_id = s.org_id WHERE s.org_id = ? AND b.budget_inr_nano IS NOT NULL")
EVENTS = ("SELECT version, recorded_at_us, data FROM events WHERE stream_id = ? AND version > ? AND version <= ?"
          " ORDER BY version LIMIT ?")
# The org's live keys that expire between two instants.
EXPIRING = (
    "SELECT b.key_id, b.expires_at_us FROM key_budgets b JOIN api_keys k ON k.key_id = b.key_id"
    " AND k.org_id = b.org_id WHERE b.org_id = ? AND k.revoked_at_us IS NULL AND b.expires_at_us BETWEEN ? AND ?"
    " ORDER BY b.expires_at_us, b.key_id")


class Happened(NamedTuple):
    """One event of an org's stream: its version, when it was recorded, and the event."""

    version: int
    at_us: int
    event: Event


class Money(NamedTuple):
    """An org's balance, its keys' budgets (key -> (nano-INR, period)), and what each of those
    keys was charged each UTC day ((key, day) -> nano-INR), as the projections hold them now."""

    balance_inr_nano: int
    budgets: dict[str, tuple[int, str]]
    charged: dict[tuple[str, int], int]


async def money(recorder: Recorder, org_id: str) -> Money:
    balance = await recorder._fetch(BALANCE, (org_id,))
    budgets = {key: (amount, period) for key, amount, period in await recorder._fetch(BUDGETS, (org_id,))}
    charged = {(key, day): amount for key, day, amount in await recorder._fetch(BUDGETED_DAYS, (org_id,))}
    return Money(balance[0][0] if balance else 0, budgets, charged)


async def events(recorder: Recorder, stream_id: str, after: int, upto: int, limit: int) -> list[Happened]:
    """Up to `limit` of the stream's events with versions in (after, upto], in order."""
    rows = await recorder._fetch(EVENTS, (stream_id, after, upto, limit))
    return [Happened(version, at_us, decode_event(bytes(data))) for version, at_us, data in rows]


async def expiring(recorder: Recorder, org_id: str, since_us: int, until_us: int) -> list[tuple[str, int]]:
    """The org's live keys expiring in [since_us, until_us]: (key id, expiry), soonest first."""
    return [(key_id, at) for key_id, at in await recorder._fetch(EXPIRING, (org_id, since_us, until_us))]
