"""Projections: how each event changes the read tables. Portable SQL, qmark placeholders.

Both backends run exactly these statements, inside the transaction that records the events
(and again, from events alone, on replay), so the tables are a pure function of the log.
"""

from typing import NamedTuple

import msgspec

from ledger.events import (
    LEGACY_LEASE_US, ApiKeyCreated, BatchCancelRequested, BatchCreated, BatchEnded, BatchSubmitted, FileDeleted,
    FileStored, ApiKeyRevoked, CreditsAdded, CreditsHeld, HoldReleased, HoldsRenewed,
    IdempotencyKeyClaimed,
    IdempotencyKeyReleased, KeyLimitsSet, KeySpendLimitsSet, MediaExpired, MusicTrackRecorded, OrgCreated,
    ProviderKeyRemoved,
    ProviderKeySet, RequestCompleted, RetentionChanged, WebhookAttempted, WebhookDisabled, WebhookPassed,
    WebhookRemoved, WebhookSet, SLICE_PREFIX, is_slice,
)
from ledger import webhooks
from ledger.periods import US_PER_DAY
from ledger.recorder import Recorded

# Statements run in phases: rows are created before anything updates them, so statements
# of one kind can be batched into a single executemany without changing the result.
# MARK updates rows that LOG inserts (a replayed batch may hold a track and its expiry).
# TOUCH and ROLLUP have a phase each so a batch of requests runs each statement as one executemany.
CREATE, UPDATE, LOG, MARK, TOUCH, ROLLUP = 0, 1, 2, 3, 4, 5


class Statement(NamedTuple):
    phase: int
    sql: str
    params: tuple


# Each table with the columns that identify a row; verify compares tables in this order.
TABLES: dict[str, str] = {
    "orgs": "org_id",
    "api_keys": "key_id",
    "request_log": "request_id",
    "music_tracks": "request_id",
    "idempotency_keys": "org_id, idempotency_key",
    "media_expired": "request_id",
    "provider_keys": "org_id, provider",
    "key_limits": "key_id",
    "key_budgets": "key_id",
    "holds": "hold_id",
    "key_spend_daily": "org_id, key_id, day",
    "usage_daily": "org_id, day, route, model, status",
    "charges_daily": "org_id, day, key_id, model, usd_to_inr",
    "balance_daily": "org_id, day",
    "webhooks": "webhook_id",
    "webhook_deliveries": "position",
    "files": "file_id",
    "files_deleted": "file_id",
    "batches": "batch_id",
}

# What an org may still reserve: the credit not yet spent nor held.
AVAILABLE = "credits_inr_nano - spent_inr_nano - held_inr_nano"


def slice_held(hold_id: str) -> str:
    """SQL true of a hold whose id (the SQL expression `hold_id`) names an escrow slice: events.is_slice."""
    return f"substr({hold_id}, 1, {len(SLICE_PREFIX)}) = '{SLICE_PREFIX}'"


# What a key with a budget may still reserve in the period holding a moment: the budget less what
# it was charged since the period's first day (ledger.periods.first_day: {day} for a daily
# budget, {month} for a monthly one) and what its running requests hold. {keys} names the keys.
ROOM = (
    "SELECT b.key_id, b.budget_inr_nano - k.held_inr_nano - COALESCE((SELECT SUM(s.charged_inr_nano)"
    " FROM key_spend_daily s WHERE s.org_id = b.org_id AND s.key_id = b.key_id AND s.day >= CASE b.budget_period"
    " WHEN 'day' THEN {day} WHEN 'month' THEN {month} ELSE 0 END), 0)"
    " FROM key_budgets b JOIN api_keys k ON k.key_id = b.key_id AND k.org_id = b.org_id"
    " WHERE b.budget_inr_nano IS NOT NULL AND b.key_id {keys}")
# Each hold still held: what remains of it and when it lapses (ledger.leases). A second hold of one
# id adds to it; a release or a draw takes from it; a release leaving nothing (an expiry always)
# removes the row, in a later phase. A draw never leaves nothing (ledger.recorder.plan refuses it),
# so a row holds nothing only after a release, and removing it at the end of a batch is the same
# as removing it at once. Its lapse is set by the latest hold or renewal (lapse_position: that
# event's position), and a renewal older than the row's latest hold is passed over, so a replay
# that applies a batch's holds before its renewals comes out the same, whatever the batches.
PUT_HOLD = (
    "INSERT INTO holds (hold_id, org_id, key_id, amount_inr_nano, lapses_at_us, lapse_position)"
    " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (hold_id) DO UPDATE SET"
    " amount_inr_nano = holds.amount_inr_nano + excluded.amount_inr_nano,"
    " lapses_at_us = excluded.lapses_at_us, lapse_position = excluded.lapse_position")
TAKE_HOLD = "UPDATE holds SET amount_inr_nano = amount_inr_nano - ? WHERE hold_id = ?"
DROP_EMPTY_HOLD = "DELETE FROM holds WHERE hold_id = ? AND amount_inr_nano <= 0"
RENEW_HOLD = "UPDATE holds SET lapses_at_us = ?, lapse_position = ? WHERE hold_id = ? AND lapse_position < ?"
ADD_KEY_HELD = "UPDATE api_keys SET held_inr_nano = held_inr_nano + ? WHERE key_id = ? AND org_id = ?"
ADD_KEY_SPEND = (
    "INSERT INTO key_spend_daily (org_id, key_id, day, charged_inr_nano) VALUES (?, ?, ?, ?)"
    " ON CONFLICT (org_id, key_id, day) DO UPDATE SET"
    " charged_inr_nano = key_spend_daily.charged_inr_nano + excluded.charged_inr_nano")
# Only a key of the stream's own org, as SET_KEY_LIMITS.
SET_KEY_BUDGET = (
    "INSERT INTO key_budgets (key_id, org_id, budget_inr_nano, budget_period, models, expires_at_us, set_at_us)"
    " SELECT ?, ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM api_keys WHERE key_id = ? AND org_id = ?)"
    " ON CONFLICT (key_id) DO UPDATE SET budget_inr_nano = excluded.budget_inr_nano,"
    " budget_period = excluded.budget_period, models = excluded.models,"
    " expires_at_us = excluded.expires_at_us, set_at_us = excluded.set_at_us")
INSERT_ORG = ("INSERT INTO orgs (org_id, name, retention, created_at_us, credits_inr_nano,"
              " spent_inr_nano, held_inr_nano, requests) VALUES (?, ?, ?, ?, 0, 0, 0, 0)")
ADD_HELD = "UPDATE orgs SET held_inr_nano = held_inr_nano + ? WHERE org_id = ?"
INSERT_TRACK = (
    "INSERT INTO music_tracks (request_id, org_id, position, created_at_us, model, provider, storage,"
    " error, object_key, size, etag, mime_type, prompt_content_id, text_content_id, expired_at_us)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL)")
# An Idempotency-Key's row: running (running_until_us > 0, when its claim lapses) from its claim,
# settled (0) once its request succeeded. The primary key makes a second claim of a key the org
# still holds break its unit; a claim ends by its release, which a superseding claim (of a lapsed
# or expired key) carries in the same unit. Claim, release and remember share the LOG phase, so
# a batch applies them in log order, as a replay in other batches does.
CLAIM_KEY = (
    "INSERT INTO idempotency_keys (org_id, idempotency_key, request_hash, request_id, created_at_us,"
    " running_until_us) VALUES (?, ?, ?, ?, ?, ?)")
RELEASE_KEY = "DELETE FROM idempotency_keys WHERE org_id = ? AND idempotency_key = ? AND request_id = ?"
# A success settles its own claim (or, recorded before claims existed, replaces a settled use); it
# never overwrites another request's running claim.
REMEMBER_KEY = (
    "INSERT INTO idempotency_keys (org_id, idempotency_key, request_hash, request_id, created_at_us,"
    " running_until_us) VALUES (?, ?, ?, ?, ?, 0) ON CONFLICT (org_id, idempotency_key) DO UPDATE SET"
    " request_hash = excluded.request_hash, request_id = excluded.request_id,"
    " created_at_us = excluded.created_at_us, running_until_us = 0"
    " WHERE idempotency_keys.running_until_us = 0 OR idempotency_keys.request_id = excluded.request_id")
# The primary key of media_expired makes a second MediaExpired for a track break the unit.
INSERT_EXPIRED = ("INSERT INTO media_expired (request_id, org_id, position, object_key, expired_at_us)"
                  " VALUES (?, ?, ?, ?, ?)")
MARK_EXPIRED = "UPDATE music_tracks SET expired_at_us = ? WHERE request_id = ? AND org_id = ?"
SET_PROVIDER_KEY = (
    "INSERT INTO provider_keys (org_id, provider, fingerprint, set_at_us) VALUES (?, ?, ?, ?)"
    " ON CONFLICT (org_id, provider) DO UPDATE SET fingerprint = excluded.fingerprint,"
    " set_at_us = excluded.set_at_us")
REMOVE_PROVIDER_KEY = "DELETE FROM provider_keys WHERE org_id = ? AND provider = ?"
# Only a key of the stream's own org: one org can never change another's limits.
SET_KEY_LIMITS = (
    "INSERT INTO key_limits (key_id, org_id, requests_per_minute, tokens_per_minute)"
    " SELECT ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM api_keys WHERE key_id = ? AND org_id = ?)"
    " ON CONFLICT (key_id) DO UPDATE SET requests_per_minute = excluded.requests_per_minute,"
    " tokens_per_minute = excluded.tokens_per_minute")
SET_RETENTION = "UPDATE orgs SET retention = ? WHERE org_id = ?"
ADD_CREDITS = "UPDATE orgs SET credits_inr_nano = credits_inr_nano + ? WHERE org_id = ?"
# A request's charge, and what of it was drawn from holds (RequestCompleted.draws).
ADD_SPEND = ("UPDATE orgs SET spent_inr_nano = spent_inr_nano + ?, held_inr_nano = held_inr_nano - ?,"
             " requests = requests + ? WHERE org_id = ?")
INSERT_KEY = ("INSERT INTO api_keys (key_id, org_id, key_hash, prefix, name, admin,"
              " created_at_us, revoked_at_us) VALUES (?, ?, ?, ?, ?, ?, ?, NULL)")
# A revocation only acts within its own org's stream, so one org can never revoke another's key.
REVOKE_KEY = ("UPDATE api_keys SET revoked_at_us = ? WHERE key_id = ? AND org_id = ?"
              " AND revoked_at_us IS NULL")
# Every request of a batch is recorded at the same instant: only the first changes the row.
TOUCH_KEY = ("UPDATE api_keys SET last_used_at_us = ? WHERE key_id = ? AND org_id = ?"
             " AND (last_used_at_us IS NULL OR last_used_at_us < ?)")
# Per org, UTC day, route, model and status: what the dashboard's overview sums, so it reads a
# few rows a day instead of scanning the request log.
ADD_DAILY_USAGE = (
    "INSERT INTO usage_daily (org_id, day, route, model, status, requests, prompt_tokens,"
    " completion_tokens, cost_usd_nano, charged_inr_nano) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (org_id, day, route, model, status) DO UPDATE SET"
    " requests = usage_daily.requests + excluded.requests,"
    " prompt_tokens = usage_daily.prompt_tokens + excluded.prompt_tokens,"
    " completion_tokens = usage_daily.completion_tokens + excluded.completion_tokens,"
    " cost_usd_nano = usage_daily.cost_usd_nano + excluded.cost_usd_nano,"
    " charged_inr_nano = usage_daily.charged_inr_nano + excluded.charged_inr_nano")
# What a monthly statement reads (gateway.dashboard.statements), per org and UTC day: the charges
# by key, model and rate; the credits added and the net change of what holds hold (all of them,
# escrow slices' included) and, apart, of what slices hold (ledger.events.is_slice).
ADD_CHARGES = (
    "INSERT INTO charges_daily (org_id, day, key_id, model, usd_to_inr, requests, charged_inr_nano)"
    " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (org_id, day, key_id, model, usd_to_inr) DO UPDATE SET"
    " requests = charges_daily.requests + excluded.requests,"
    " charged_inr_nano = charges_daily.charged_inr_nano + excluded.charged_inr_nano")
ADD_BALANCE = (
    "INSERT INTO balance_daily (org_id, day, credits_inr_nano, held_inr_nano, escrow_inr_nano) VALUES (?, ?, ?, ?, ?)"
    " ON CONFLICT (org_id, day) DO UPDATE SET"
    " credits_inr_nano = balance_daily.credits_inr_nano + excluded.credits_inr_nano,"
    " held_inr_nano = balance_daily.held_inr_nano + excluded.held_inr_nano,"
    " escrow_inr_nano = balance_daily.escrow_inr_nano + excluded.escrow_inr_nano")
INSERT_REQUEST = (
    "INSERT INTO request_log (request_id, org_id, position, key_id, created_at_us, route, model,"
    " provider, status, stream, prompt_tokens, completion_tokens, cost_usd_nano, cost_inr_nano,"
    " charged_inr_nano, usd_to_inr, latency_ms, error, content_id, anomaly, price_version, price_tier,"
    " batch_id, custom_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
INSERT_FILE = (
    "INSERT INTO files (file_id, org_id, position, created_at_us, purpose, filename, bytes, lines, sha256,"
    " object_key, storage, expires_at_us, key_id, deleted_at_us, expired) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
    " ?, ?, NULL, 0)")
# The primary key of files_deleted makes a second FileDeleted of a file break its unit.
INSERT_FILE_DELETED = ("INSERT INTO files_deleted (file_id, org_id, position, expired, deleted_at_us)"
                       " VALUES (?, ?, ?, ?, ?)")
MARK_FILE_DELETED = "UPDATE files SET deleted_at_us = ?, expired = ? WHERE file_id = ? AND org_id = ?"
INSERT_BATCH = (
    "INSERT INTO batches (batch_id, org_id, position, key_id, api, endpoint, model, provider, native,"
    " input_file_id, lines, hold_id, completion_window, metadata, created_at_us, expires_at_us, upstream_id,"
    " cancel_requested_at_us, status, ended_at_us, output_file_id, error_file_id, errors, succeeded, failed,"
    " charged_inr_nano, prompt_tokens, completion_tokens) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
    " '', NULL, '', NULL, '', '', '', 0, 0, 0, 0, 0)")
# A batch's changes touch columns of their own, so any order of them in a batch comes out the same
# (the status of a running batch is read from cancel_requested_at_us: ledger.batch_queries).
SET_UPSTREAM = "UPDATE batches SET upstream_id = ? WHERE batch_id = ? AND org_id = ?"
REQUEST_CANCEL = ("UPDATE batches SET cancel_requested_at_us = ? WHERE batch_id = ? AND org_id = ?"
                  " AND cancel_requested_at_us IS NULL")
END_BATCH = ("UPDATE batches SET status = ?, ended_at_us = ?, output_file_id = ?, error_file_id = ?, errors = ?"
             " WHERE batch_id = ? AND org_id = ?")
ADD_BATCH_LINE = (
    "UPDATE batches SET succeeded = succeeded + ?, failed = failed + ?, charged_inr_nano = charged_inr_nano + ?,"
    " prompt_tokens = prompt_tokens + ?, completion_tokens = completion_tokens + ? WHERE batch_id = ? AND org_id = ?")


def statements(recorded: Recorded) -> list[Statement]:
    """The projection statements for one recorded event."""
    org, at, position = recorded.stream_id, recorded.recorded_at_us, recorded.position
    match recorded.event:
        case OrgCreated(name=name, retention=retention):
            return [Statement(CREATE, INSERT_ORG, (org, name, retention, at))]
        case RetentionChanged(retention=retention):
            return [Statement(UPDATE, SET_RETENTION, (retention, org))]
        case CreditsAdded(amount_inr_nano=amount):
            return [Statement(UPDATE, ADD_CREDITS, (amount, org)),
                    Statement(ROLLUP, ADD_BALANCE, (org, at // US_PER_DAY, amount, 0, 0))]
        case ApiKeyCreated() as e:
            return [Statement(CREATE, INSERT_KEY, (e.key_id, org, e.key_hash, e.prefix, e.name,
                                                    int(e.admin), at))]
        case ApiKeyRevoked(key_id=key_id):
            return [Statement(UPDATE, REVOKE_KEY, (at, key_id, org))]
        case RequestCompleted() as e:
            return _request_statements(recorded, e)
        case CreditsHeld() as e:
            lapses = at + (e.lease_us or LEGACY_LEASE_US)
            return [Statement(CREATE, PUT_HOLD, (e.hold_id, org, e.key_id, e.amount_inr_nano, lapses, position)),
                    *_held(org, e.hold_id, e.key_id, e.amount_inr_nano, at)]
        case HoldReleased() as e:
            return [Statement(UPDATE, TAKE_HOLD, (e.amount_inr_nano, e.hold_id)),
                    Statement(MARK, DROP_EMPTY_HOLD, (e.hold_id,)),
                    *_held(org, e.hold_id, e.key_id, -e.amount_inr_nano, at)]
        case HoldsRenewed(hold_ids=hold_ids, lease_us=lease_us):
            return [Statement(UPDATE, RENEW_HOLD, (at + lease_us, position, hold_id, position)) for hold_id in hold_ids]
        case KeySpendLimitsSet() as e:
            return [Statement(UPDATE, SET_KEY_BUDGET, (
                e.key_id, org, e.budget_inr_nano, e.budget_period, ",".join(e.models), e.expires_at_us, at,
                e.key_id, org))]
        case MusicTrackRecorded() as e:
            return _track_statements(recorded, e)
        # One phase for both, so a set and a removal in one batch keep their order.
        case ProviderKeySet(provider=provider, fingerprint=fingerprint):
            return [Statement(LOG, SET_PROVIDER_KEY, (org, provider, fingerprint, at))]
        case KeyLimitsSet(key_id=key_id, requests_per_minute=rpm, tokens_per_minute=tpm):
            return [Statement(UPDATE, SET_KEY_LIMITS, (key_id, org, rpm, tpm, key_id, org))]
        case ProviderKeyRemoved(provider=provider):
            return [Statement(LOG, REMOVE_PROVIDER_KEY, (org, provider))]
        case IdempotencyKeyClaimed() as e:
            return [Statement(LOG, CLAIM_KEY, (org, e.idempotency_key, e.request_hash, e.request_id, at,
                                               at + e.lease_us))]
        case IdempotencyKeyReleased(idempotency_key=key, request_id=request_id):
            return [Statement(LOG, RELEASE_KEY, (org, key, request_id))]
        case MediaExpired(request_id=request_id, object_key=key):
            return [Statement(LOG, INSERT_EXPIRED, (request_id, org, recorded.position, key, at)),
                    Statement(MARK, MARK_EXPIRED, (at, request_id, org))]
        # One phase for every webhook change (ledger.webhooks), so a batch keeps their order.
        case FileStored() | FileDeleted() | BatchCreated() | BatchSubmitted() | BatchCancelRequested() | BatchEnded():
            return _batch_statements(recorded)
        case WebhookSet() | WebhookRemoved() | WebhookAttempted() | WebhookPassed() | WebhookDisabled():
            return [Statement(LOG, sql, params) for sql, params in webhooks.changes(recorded)]
    return []


def _batch_statements(recorded: Recorded) -> list[Statement]:
    """What files and batches change (ledger.events.FileStored .. BatchEnded)."""
    org, at, position = recorded.stream_id, recorded.recorded_at_us, recorded.position
    match recorded.event:
        case FileStored() as e:
            return [Statement(LOG, INSERT_FILE, (e.file_id, org, position, at, e.purpose, e.filename, e.bytes,
                                                 e.lines, e.sha256, e.object_key, e.storage, e.expires_at_us,
                                                 e.key_id))]
        case FileDeleted(file_id=file_id, expired=expired):
            return [Statement(LOG, INSERT_FILE_DELETED, (file_id, org, position, int(expired), at)),
                    Statement(MARK, MARK_FILE_DELETED, (at, int(expired), file_id, org))]
        case BatchCreated() as e:
            return [Statement(CREATE, INSERT_BATCH, (
                e.batch_id, org, position, e.key_id, e.api, e.endpoint, e.model, e.provider, int(e.native),
                e.input_file_id, e.lines, e.hold_id, e.completion_window, _json(e.metadata), at, e.expires_at_us))]
        case BatchSubmitted(batch_id=batch_id, upstream_id=upstream_id):
            return [Statement(MARK, SET_UPSTREAM, (upstream_id, batch_id, org))]
        case BatchCancelRequested(batch_id=batch_id):
            return [Statement(MARK, REQUEST_CANCEL, (at, batch_id, org))]
        case BatchEnded() as e:
            errors = _json([msgspec.to_builtins(error) for error in e.errors]) if e.errors else ""
            return [Statement(MARK, END_BATCH, (e.status, at, e.output_file_id, e.error_file_id, errors,
                                                e.batch_id, org))]
    return []


def _json(value: object) -> str:
    return msgspec.json.encode(value).decode()


def _held(org: str, hold_id: str, key_id: str, amount: int, at: int) -> list[Statement]:
    """What an org (and, when the hold names one, a key) holds, changed by `amount` at `at`."""
    escrow = amount if is_slice(hold_id) else 0
    held = [Statement(UPDATE, ADD_HELD, (amount, org)),
            Statement(ROLLUP, ADD_BALANCE, (org, at // US_PER_DAY, 0, amount, escrow))]
    return [*held, Statement(UPDATE, ADD_KEY_HELD, (amount, key_id, org))] if key_id else held


def _request_statements(recorded: Recorded, e: RequestCompleted) -> list[Statement]:
    org, at = recorded.stream_id, recorded.recorded_at_us
    day, drawn = at // US_PER_DAY, e.drawn_inr_nano if e.draws else 0
    done = [Statement(UPDATE, ADD_SPEND, (e.charged_inr_nano, drawn, 1, org)),
            Statement(LOG, INSERT_REQUEST, _request_row(recorded, e)),
            Statement(TOUCH, TOUCH_KEY, (at, e.key_id, org, at)),
            Statement(ROLLUP, ADD_DAILY_USAGE, _usage_row(recorded, e)),
            Statement(ROLLUP, ADD_CHARGES, (org, day, e.key_id, e.model, e.usd_to_inr, 1, e.charged_inr_nano))]
    if e.charged_inr_nano:
        done.append(Statement(ROLLUP, ADD_KEY_SPEND, (org, e.key_id, day, e.charged_inr_nano)))
    if drawn:  # the org's part of the draws below, as ADD_SPEND's
        done.append(Statement(ROLLUP, ADD_BALANCE, (org, day, 0, -drawn, -e.drawn_from_slices_inr_nano)))
    if e.batch_id:
        ok = e.status < 400
        done.append(Statement(MARK, ADD_BATCH_LINE, (int(ok), int(not ok), e.charged_inr_nano, e.prompt_tokens,
                                                     e.completion_tokens, e.batch_id, org)))
    for draw in e.draws:  # the org's part is in ADD_SPEND
        done.append(Statement(UPDATE, TAKE_HOLD, (draw.amount_inr_nano, draw.hold_id)))
        if draw.key_id:
            done.append(Statement(UPDATE, ADD_KEY_HELD, (-draw.amount_inr_nano, draw.key_id, org)))
    return done


def _track_statements(recorded: Recorded, e: MusicTrackRecorded) -> list[Statement]:
    row = (e.request_id, recorded.stream_id, recorded.position, recorded.recorded_at_us, e.model,
           e.provider, e.storage, int(e.error), e.object_key, e.size, e.etag, e.mime_type,
           e.prompt_content_id, e.text_content_id)
    statements = [Statement(LOG, INSERT_TRACK, row)]
    if e.idempotency_key:
        statements.append(Statement(LOG, REMEMBER_KEY, (recorded.stream_id, e.idempotency_key,
                                                        e.request_hash, e.request_id, recorded.recorded_at_us)))
    return statements


def _request_row(recorded: Recorded, e: RequestCompleted) -> tuple:
    return (e.request_id, recorded.stream_id, recorded.position, e.key_id, recorded.recorded_at_us,
            e.route, e.model, e.provider, e.status, int(e.stream), e.prompt_tokens,
            e.completion_tokens, e.cost_usd_nano, e.cost_inr_nano, e.charged_inr_nano,
            e.usd_to_inr, e.latency_ms, e.error, e.content_id, e.anomaly,
            *((e.priced.version, e.priced.tier) if e.priced else ("", "")), e.batch_id, e.custom_id)


def _usage_row(recorded: Recorded, e: RequestCompleted) -> tuple:
    return (recorded.stream_id, recorded.recorded_at_us // US_PER_DAY, e.route, e.model, e.status,
            1, e.prompt_tokens, e.completion_tokens, e.cost_usd_nano, e.charged_inr_nano)


def select_all(table: str) -> str:
    """A query returning every row of a projection table in a stable order."""
    return f"SELECT * FROM {table} ORDER BY {TABLES[table]}"


def select_page(table: str, after: tuple | None, limit: int, orgs: tuple[str, str | None] | None = None
                ) -> tuple[str, tuple]:
    """The next `limit` rows of a projection table in key order, after the row keyed `after` (from
    the first when None), of the orgs from `orgs[0]` up to `orgs[1]` (None: no end) if given; each
    row led by its key columns, which the next page starts after. Every projection row is of one
    org, the stream whose events made it (org_id)."""
    keys, conditions, params = TABLES[table], [], list(after or ())
    if after:
        conditions.append(f"({keys}) > ({', '.join('?' * len(after))})")
    if orgs is not None:  # concatenated: read in key order through the key's index, never sorted
        conditions.append("(org_id || '') >= ?" if orgs[1] is None else "(org_id || '') >= ? AND (org_id || '') < ?")
        params += [org for org in orgs if org is not None]
    where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
    return f"SELECT {keys}, * FROM {table}{where} ORDER BY {keys} LIMIT ?", (*params, limit)


def key_width(table: str) -> int:
    return len(TABLES[table].split(","))


def count_rows(table: str, orgs: tuple[str, str | None] | None = None) -> tuple[str, tuple]:
    """How many rows a table holds (of the orgs in a range, as select_page)."""
    if orgs is None:
        return f"SELECT count(*) FROM {table}", ()
    if orgs[1] is None:
        return f"SELECT count(*) FROM {table} WHERE org_id >= ?", (orgs[0],)
    return f"SELECT count(*) FROM {table} WHERE org_id >= ? AND org_id < ?", orgs
