"""The read API of the ledger's projections: organizations, keys, limits, provider keys,
Idempotency-Key uses, the usage and statement rollups and the retention work list, as typed rows.

The gateway and the sweeper read the ledger only through these functions (and
ledger.log_queries for the request log and music tracks); the SQL, in qmark form, is the
recorder's business, which converts it for its database.
"""

from typing import NamedTuple

from ledger import periods, projections
from ledger.recorder import Recorder
from ledger.schema import HOSTED


class Org(NamedTuple):
    org_id: str
    name: str
    retention: str
    credits_inr_nano: int
    spent_inr_nano: int
    held_inr_nano: int


class ApiKey(NamedTuple):
    key_id: str
    org_id: str
    prefix: str
    name: str
    admin: bool
    created_at_us: int
    last_used_at_us: int | None
    revoked_at_us: int | None


class ActiveKey(NamedTuple):
    """A key not revoked, as the directory needs it to authenticate."""
    key_id: str
    org_id: str
    key_hash: str
    admin: bool


class KeyLimits(NamedTuple):
    key_id: str
    requests_per_minute: int
    tokens_per_minute: int


class SpendLimits(NamedTuple):
    """A key's spend controls (ledger.events.KeySpendLimitsSet)."""
    key_id: str
    budget_inr_nano: int | None
    budget_period: str
    models: tuple[str, ...]
    expires_at_us: int | None


class KeySpend(NamedTuple):
    """A key: what it was charged in its budget's current period; what its running requests' own
    holds hold now, and its escrow slices (credit a process took ahead for its requests)."""
    key_id: str
    spent_inr_nano: int
    held_inr_nano: int
    escrow_inr_nano: int


class ProviderKey(NamedTuple):
    org_id: str
    provider: str
    fingerprint: str


class KeyUse(NamedTuple):
    """An Idempotency-Key's row: a running claim (running_until_us > 0) or a settled success."""
    request_hash: str
    request_id: str
    created_at_us: int
    running_until_us: int


class DailyUsage(NamedTuple):
    """One row of the usage rollup: an org's requests of one UTC day, route, model and status."""
    day: int
    route: str
    model: str
    status: int
    requests: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd_nano: int
    charged_inr_nano: int


class MonthTotals(NamedTuple):
    """An org's balance rollup around a month: credits before and in it, charges before it, and
    what holds held at its end (ledger.projections, balance_daily and charges_daily): requests' own
    holds, and escrow slices."""
    credits_before_inr_nano: int
    credits_inr_nano: int
    charged_before_inr_nano: int
    held_inr_nano: int
    escrow_inr_nano: int


class DailyCharge(NamedTuple):
    """One row of the charges rollup: an org's requests of one UTC day, key, model and rate."""
    day: int
    key_id: str
    model: str
    usd_to_inr: str
    requests: int
    charged_inr_nano: int


class DueTrack(NamedTuple):
    created_at_us: int
    request_id: str
    org_id: str
    object_key: str


ORGS = "SELECT org_id, name, retention, credits_inr_nano, spent_inr_nano, held_inr_nano FROM orgs"
API_KEYS = ("SELECT key_id, org_id, prefix, name, admin, created_at_us, last_used_at_us, revoked_at_us"
            " FROM api_keys")
USAGE = ("SELECT day, route, model, status, requests, prompt_tokens, completion_tokens, cost_usd_nano,"
         " charged_inr_nano FROM usage_daily WHERE org_id = ? AND day >= ?")
# Days in [?, ?): the month. Both read one org's rows of a rollup through its primary key.
BALANCE_AROUND = (
    "SELECT COALESCE(SUM(CASE WHEN day < ? THEN credits_inr_nano ELSE 0 END), 0),"
    " COALESCE(SUM(CASE WHEN day >= ? THEN credits_inr_nano ELSE 0 END), 0),"
    " COALESCE(SUM(held_inr_nano - escrow_inr_nano), 0), COALESCE(SUM(escrow_inr_nano), 0)"
    " FROM balance_daily WHERE org_id = ? AND day < ?")
CHARGED_BEFORE = "SELECT COALESCE(SUM(charged_inr_nano), 0) FROM charges_daily WHERE org_id = ? AND day < ?"
CHARGES = ("SELECT day, key_id, model, usd_to_inr, requests, charged_inr_nano FROM charges_daily"
           " WHERE org_id = ? AND day >= ? AND day < ? ORDER BY day, key_id, model, usd_to_inr")
KEY_USE = ("SELECT request_hash, request_id, created_at_us, running_until_us FROM idempotency_keys"
           " WHERE org_id = ? AND idempotency_key = ?")
# Keyset paging: a key whose delete failed stays due, so paging by offset or by "still due"
# would either skip tracks or loop on the failed ones. HOSTED keeps it on the partial index.
DUE_MEDIA = (
    f"SELECT created_at_us, request_id, org_id, object_key FROM music_tracks WHERE {HOSTED} AND created_at_us < ?"
    " AND created_at_us >= ? AND (created_at_us > ? OR request_id > ?) ORDER BY created_at_us, request_id LIMIT ?")
HOSTED_DUE = f"SELECT COUNT(*) FROM music_tracks WHERE {HOSTED} AND created_at_us < ?"
DUE_TEXT = "SELECT COUNT(*) FROM content WHERE body IS NOT NULL AND created_at_us < ?"


async def ping(recorder: Recorder) -> None:
    """One round trip to the database; raises LedgerUnavailable when it does not answer."""
    await recorder._fetch("SELECT 1")


LAST_POSITION = "SELECT COALESCE(MAX(position), 0) FROM events"  # the append reads it too


async def last_position(recorder: Recorder) -> int:
    """The position of the last event recorded (0: none yet)."""
    [(position,)] = await recorder._fetch(LAST_POSITION)
    return position


async def org(recorder: Recorder, org_id: str) -> Org | None:
    rows = await recorder._fetch(f"{ORGS} WHERE org_id = ?", (org_id,))
    return Org(*rows[0]) if rows else None


async def orgs(recorder: Recorder) -> list[Org]:
    return [Org(*row) for row in await recorder._fetch(ORGS)]


def _api_key(row: tuple) -> ApiKey:
    return ApiKey._make((*row[:4], bool(row[4]), *row[5:]))


async def api_key(recorder: Recorder, key_id: str) -> ApiKey | None:
    """A key of any org, revoked or not."""
    rows = await recorder._fetch(f"{API_KEYS} WHERE key_id = ?", (key_id,))
    return _api_key(rows[0]) if rows else None


async def org_api_keys(recorder: Recorder, org_id: str) -> list[ApiKey]:
    """Every key of the org, revoked ones too, newest first."""
    rows = await recorder._fetch(f"{API_KEYS} WHERE org_id = ? ORDER BY created_at_us DESC, key_id", (org_id,))
    return [_api_key(row) for row in rows]


async def active_keys(recorder: Recorder) -> list[ActiveKey]:
    rows = await recorder._fetch("SELECT key_id, org_id, key_hash, admin FROM api_keys WHERE revoked_at_us IS NULL")
    return [ActiveKey(key_id, org_id, key_hash, bool(admin)) for key_id, org_id, key_hash, admin in rows]


async def key_limits(recorder: Recorder, key_id: str | None = None) -> list[KeyLimits]:
    """Every key's own rate limits (one key's, when named)."""
    where, params = (" WHERE key_id = ?", (key_id,)) if key_id else ("", ())
    rows = await recorder._fetch("SELECT key_id, requests_per_minute, tokens_per_minute FROM key_limits" + where,
                                 params)
    return [KeyLimits(*row) for row in rows]


SPEND_LIMITS = "SELECT key_id, budget_inr_nano, budget_period, models, expires_at_us FROM key_budgets"


def _spend_limits(row: tuple) -> SpendLimits:
    return SpendLimits(row[0], row[1], row[2], tuple(filter(None, row[3].split(","))), row[4])


async def spend_limits(recorder: Recorder, org_id: str | None = None) -> list[SpendLimits]:
    """Every key's spend controls (of one org, when named)."""
    where, params = (" WHERE org_id = ?", (org_id,)) if org_id else ("", ())
    return [_spend_limits(row) for row in await recorder._fetch(SPEND_LIMITS + where, params)]


async def key_spend_limits(recorder: Recorder, org_id: str, key_id: str) -> SpendLimits | None:
    """One key's spend controls, if it was ever given any."""
    rows = await recorder._fetch(SPEND_LIMITS + " WHERE org_id = ? AND key_id = ?", (org_id, key_id))
    return _spend_limits(rows[0]) if rows else None


# What escrow slices hold (ledger.events.is_slice) of the holds named by {where}.
SLICES_HOLD = ("COALESCE((SELECT SUM(h.amount_inr_nano) FROM holds h WHERE {where} AND "
               + projections.slice_held("h.hold_id") + "), 0)")
# What each of an org's keys was charged since its budget period's first day (ledger.periods), what
# it holds (each hold naming it is a request's own or a slice of its own) and its slices hold.
KEY_SPEND = (
    "SELECT k.key_id, COALESCE((SELECT SUM(s.charged_inr_nano) FROM key_spend_daily s WHERE s.org_id = k.org_id"
    " AND s.key_id = k.key_id AND s.day >= CASE WHEN b.budget_inr_nano IS NULL THEN 0"
    " WHEN b.budget_period = 'day' THEN ? WHEN b.budget_period = 'month' THEN ? ELSE 0 END), 0),"
    " k.held_inr_nano, " + SLICES_HOLD.format(where="h.org_id = k.org_id AND h.key_id = k.key_id")
    + " FROM api_keys k LEFT JOIN key_budgets b ON b.key_id = k.key_id AND b.org_id = k.org_id WHERE k.org_id = ?")
ORG_ESCROW = "SELECT " + SLICES_HOLD.format(where="h.org_id = ?")


async def key_room(recorder: Recorder, key_id: str, at_us: int) -> int | None:
    """What a key with a budget may still reserve in the period holding `at_us` (None: no budget);
    what the append checks under its lock (ledger.projections.ROOM), read here without it."""
    sql = projections.ROOM.format(day="?", month="?", keys="= ?")
    rows = await recorder._fetch(sql, (periods.first_day("day", at_us), periods.first_day("month", at_us), key_id))
    return int(rows[0][1]) if rows else None


async def key_spend(recorder: Recorder, org_id: str, at_us: int) -> list[KeySpend]:
    """Each of the org's keys: charged in its budget's period holding `at_us` (in total, for a key
    without a budget), held by its running requests' own holds, and by its escrow slices."""
    days = (periods.first_day("day", at_us), periods.first_day("month", at_us))
    rows = await recorder._fetch(KEY_SPEND, (*days, org_id))
    return [KeySpend(k, int(spent), held - int(escrow), int(escrow)) for k, spent, held, escrow in rows]


async def org_escrow(recorder: Recorder, org_id: str) -> int:
    """What the org's escrow slices hold now (its own and its keys'): part of Org.held_inr_nano."""
    [(escrow,)] = await recorder._fetch(ORG_ESCROW, (org_id,))
    return int(escrow)


async def provider_keys(recorder: Recorder) -> list[ProviderKey]:
    rows = await recorder._fetch("SELECT org_id, provider, fingerprint FROM provider_keys")
    return [ProviderKey(*row) for row in rows]


async def has_provider_key(recorder: Recorder, org_id: str, provider: str) -> bool:
    return bool(await recorder._fetch("SELECT 1 FROM provider_keys WHERE org_id = ? AND provider = ?",
                                      (org_id, provider)))


async def sealed_secret(recorder: Recorder, stream_id: str, name: str) -> bytes | None:
    """A secret as its owner sealed it (ledger.recorder.Secret), or None when none is stored."""
    rows = await recorder._fetch("SELECT sealed FROM secrets WHERE stream_id = ? AND name = ?", (stream_id, name))
    return bytes(rows[0][0]) if rows else None


async def key_use(recorder: Recorder, org_id: str, idempotency_key: str) -> KeyUse | None:
    rows = await recorder._fetch(KEY_USE, (org_id, idempotency_key))
    return KeyUse(*rows[0]) if rows else None


async def daily_usage(recorder: Recorder, org_id: str, first_day: int) -> list[DailyUsage]:
    """The org's rollup rows from UTC day `first_day` (days since the epoch) on, in no order."""
    return [DailyUsage(*row) for row in await recorder._fetch(USAGE, (org_id, first_day))]


async def month_totals(recorder: Recorder, org_id: str, first_day: int, end_day: int) -> MonthTotals:
    """The org's balance rollup around the UTC days [first_day, end_day) (days since the epoch)."""
    [(before, credits, held, escrow)] = await recorder._fetch(BALANCE_AROUND, (first_day, first_day, org_id, end_day))
    [(charged,)] = await recorder._fetch(CHARGED_BEFORE, (org_id, first_day))
    return MonthTotals(int(before), int(credits), int(charged), int(held), int(escrow))  # PostgreSQL sums: numeric


async def daily_charges(recorder: Recorder, org_id: str, first_day: int, end_day: int) -> list[DailyCharge]:
    """The org's charges rollup rows of the UTC days [first_day, end_day), by day, key, model, rate."""
    return [DailyCharge(*row) for row in await recorder._fetch(CHARGES, (org_id, first_day, end_day))]


async def due_media_page(recorder: Recorder, before_us: int, after: tuple[int, str] = (-1, ""),
                         limit: int = 1000) -> list[DueTrack]:
    """Up to `limit` hosted tracks recorded before `before_us`, oldest first, after the track
    keyed (created_at_us, request_id) `after`."""
    rows = await recorder._fetch(DUE_MEDIA, (before_us, after[0], after[0], after[1], limit))
    return [DueTrack(*row) for row in rows]


async def hosted_due_count(recorder: Recorder, before_us: int) -> int:
    """How many hosted tracks were recorded before `before_us`."""
    [(count,)] = await recorder._fetch(HOSTED_DUE, (before_us,))
    return count


async def expired_media_count(recorder: Recorder) -> int:
    """How many hosted tracks have been swept."""
    [(count,)] = await recorder._fetch("SELECT COUNT(*) FROM media_expired")
    return count


async def due_text_count(recorder: Recorder, before_us: int) -> int:
    """How many content rows recorded before `before_us` still hold their text."""
    [(count,)] = await recorder._fetch(DUE_TEXT, (before_us,))
    return count


async def stream_version(recorder: Recorder, stream_id: str) -> int:
    """The version of a stream's newest event (0: it has none)."""
    [(version,)] = await recorder._fetch("SELECT COALESCE(MAX(version), 0) FROM events WHERE stream_id = ?",
                                         (stream_id,))
    return version
