"""The ledger's tables and indexes, described once in portable SQL and rendered per backend.

Columns are written with SQLite's type names (TEXT, INTEGER, BLOB); PostgreSQL gets BIGINT and
BYTEA for the last two. Every statement is CREATE ... IF NOT EXISTS, so running the DDL on an
existing store changes nothing. What only one backend has (SQLite's triggers, PostgreSQL's
trigger function and its ADD COLUMN upgrades) stays in that backend's module.
"""

import re
from collections.abc import Sequence

# Each table's columns and table constraints, in the order they are created.
TABLES: dict[str, tuple[str, ...]] = {
    "events": ("position INTEGER PRIMARY KEY", "stream_id TEXT NOT NULL", "version INTEGER NOT NULL",
               "type TEXT NOT NULL", "recorded_at_us INTEGER NOT NULL", "data BLOB NOT NULL",
               "hash BLOB NOT NULL", "UNIQUE (stream_id, version)"),
    "content": ("content_id TEXT PRIMARY KEY", "stream_id TEXT NOT NULL", "sha256 TEXT NOT NULL", "body BLOB",
                "removed_at_us INTEGER", "created_at_us INTEGER NOT NULL DEFAULT 0"),
    "secrets": ("stream_id TEXT NOT NULL", "name TEXT NOT NULL", "sealed BLOB NOT NULL",
                "PRIMARY KEY (stream_id, name)"),
    "orgs": ("org_id TEXT PRIMARY KEY", "name TEXT NOT NULL", "retention TEXT NOT NULL",
             "created_at_us INTEGER NOT NULL", "credits_inr_nano INTEGER NOT NULL",
             "spent_inr_nano INTEGER NOT NULL", "held_inr_nano INTEGER NOT NULL", "requests INTEGER NOT NULL"),
    "api_keys": ("key_id TEXT PRIMARY KEY", "org_id TEXT NOT NULL", "key_hash TEXT NOT NULL UNIQUE",
                 "prefix TEXT NOT NULL", "name TEXT NOT NULL", "admin INTEGER NOT NULL",
                 "created_at_us INTEGER NOT NULL", "revoked_at_us INTEGER", "last_used_at_us INTEGER",
                 "held_inr_nano INTEGER NOT NULL DEFAULT 0"),
    "request_log": ("request_id TEXT PRIMARY KEY", "org_id TEXT NOT NULL", "position INTEGER NOT NULL",
                    "key_id TEXT NOT NULL", "created_at_us INTEGER NOT NULL", "route TEXT NOT NULL",
                    "model TEXT NOT NULL", "provider TEXT NOT NULL", "status INTEGER NOT NULL",
                    "stream INTEGER NOT NULL", "prompt_tokens INTEGER NOT NULL",
                    "completion_tokens INTEGER NOT NULL", "cost_usd_nano INTEGER NOT NULL",
                    "cost_inr_nano INTEGER NOT NULL", "charged_inr_nano INTEGER NOT NULL",
                    "usd_to_inr TEXT NOT NULL", "latency_ms INTEGER NOT NULL", "error TEXT NOT NULL",
                    "content_id TEXT NOT NULL", "anomaly TEXT NOT NULL DEFAULT ''",
                    "price_version TEXT NOT NULL DEFAULT ''", "price_tier TEXT NOT NULL DEFAULT ''",
                    "batch_id TEXT NOT NULL DEFAULT ''", "custom_id TEXT NOT NULL DEFAULT ''"),
    "music_tracks": ("request_id TEXT PRIMARY KEY", "org_id TEXT NOT NULL", "position INTEGER NOT NULL",
                     "created_at_us INTEGER NOT NULL", "model TEXT NOT NULL", "provider TEXT NOT NULL",
                     "storage TEXT NOT NULL", "error INTEGER NOT NULL", "object_key TEXT NOT NULL",
                     "size INTEGER NOT NULL", "etag TEXT NOT NULL", "mime_type TEXT NOT NULL",
                     "prompt_content_id TEXT NOT NULL", "text_content_id TEXT NOT NULL", "expired_at_us INTEGER"),
    "idempotency_keys": ("org_id TEXT NOT NULL", "idempotency_key TEXT NOT NULL", "request_hash TEXT NOT NULL",
                         "request_id TEXT NOT NULL", "created_at_us INTEGER NOT NULL",
                         "running_until_us INTEGER NOT NULL DEFAULT 0", "PRIMARY KEY (org_id, idempotency_key)"),
    "media_expired": ("request_id TEXT PRIMARY KEY", "org_id TEXT NOT NULL", "position INTEGER NOT NULL",
                      "object_key TEXT NOT NULL", "expired_at_us INTEGER NOT NULL"),
    "provider_keys": ("org_id TEXT NOT NULL", "provider TEXT NOT NULL", "fingerprint TEXT NOT NULL",
                      "set_at_us INTEGER NOT NULL", "PRIMARY KEY (org_id, provider)"),
    "key_limits": ("key_id TEXT PRIMARY KEY", "org_id TEXT NOT NULL", "requests_per_minute INTEGER NOT NULL",
                   "tokens_per_minute INTEGER NOT NULL"),
    # A key's spend controls (ledger.events.KeySpendLimitsSet); models comma-separated ("": all).
    "key_budgets": ("key_id TEXT PRIMARY KEY", "org_id TEXT NOT NULL", "budget_inr_nano INTEGER",
                    "budget_period TEXT NOT NULL", "models TEXT NOT NULL", "expires_at_us INTEGER",
                    "set_at_us INTEGER NOT NULL"),
    # Each hold still held, and when it lapses (ledger.events.CreditsHeld, ledger.leases).
    "holds": ("hold_id TEXT PRIMARY KEY", "org_id TEXT NOT NULL", "key_id TEXT NOT NULL",
              "amount_inr_nano INTEGER NOT NULL", "lapses_at_us INTEGER NOT NULL",
              "lapse_position INTEGER NOT NULL"),
    # What each key was charged per UTC day: a budget's spend in its period is a sum of these.
    "key_spend_daily": ("org_id TEXT NOT NULL", "key_id TEXT NOT NULL", "day INTEGER NOT NULL",
                        "charged_inr_nano INTEGER NOT NULL", "PRIMARY KEY (org_id, key_id, day)"),
    "usage_daily": ("org_id TEXT NOT NULL", "day INTEGER NOT NULL", "route TEXT NOT NULL", "model TEXT NOT NULL",
                    "status INTEGER NOT NULL", "requests INTEGER NOT NULL", "prompt_tokens INTEGER NOT NULL",
                    "completion_tokens INTEGER NOT NULL", "cost_usd_nano INTEGER NOT NULL",
                    "charged_inr_nano INTEGER NOT NULL", "PRIMARY KEY (org_id, day, route, model, status)"),
    # What a monthly statement sums (gateway.dashboard.statements): the requests and charges of each
    # UTC day, key, model and USD->INR rate; and per day the credits added and the net change of
    # what holds hold (+ held, - released, - drawn by a charge): all holds, and escrow slices' apart.
    "charges_daily": ("org_id TEXT NOT NULL", "day INTEGER NOT NULL", "key_id TEXT NOT NULL", "model TEXT NOT NULL",
                      "usd_to_inr TEXT NOT NULL", "requests INTEGER NOT NULL", "charged_inr_nano INTEGER NOT NULL",
                      "PRIMARY KEY (org_id, day, key_id, model, usd_to_inr)"),
    "balance_daily": ("org_id TEXT NOT NULL", "day INTEGER NOT NULL", "credits_inr_nano INTEGER NOT NULL",
                      "held_inr_nano INTEGER NOT NULL", "escrow_inr_nano INTEGER NOT NULL DEFAULT 0",
                      "PRIMARY KEY (org_id, day)"),
    # Each org's webhook endpoints (ledger.webhooks): what alerts they want, how far delivery got
    # in the org's stream (cursor_version), and the failures in a row of the one due now.
    "webhooks": ("webhook_id TEXT PRIMARY KEY", "org_id TEXT NOT NULL", "url TEXT NOT NULL", "alerts TEXT NOT NULL",
                 "balance_low_inr_nano INTEGER", "key_budget_percent TEXT NOT NULL", "key_expiring_hours INTEGER",
                 "enabled INTEGER NOT NULL", "disabled_reason TEXT NOT NULL", "created_at_us INTEGER NOT NULL",
                 "cursor_version INTEGER NOT NULL", "attempts INTEGER NOT NULL", "failing_since_us INTEGER",
                 "retry_at_us INTEGER NOT NULL"),
    # Every delivery attempt, by its event's position.
    "webhook_deliveries": ("position INTEGER PRIMARY KEY", "webhook_id TEXT NOT NULL", "org_id TEXT NOT NULL",
                           "message_id TEXT NOT NULL", "alert TEXT NOT NULL", "attempt INTEGER NOT NULL",
                           "status INTEGER NOT NULL", "delivered INTEGER NOT NULL", "error TEXT NOT NULL",
                           "latency_ms INTEGER NOT NULL", "at_us INTEGER NOT NULL"),
    # The org's files (ledger.events.FileStored) and those deleted, once each (FileDeleted).
    "files": ("file_id TEXT PRIMARY KEY", "org_id TEXT NOT NULL", "position INTEGER NOT NULL",
              "created_at_us INTEGER NOT NULL", "purpose TEXT NOT NULL", "filename TEXT NOT NULL",
              "bytes INTEGER NOT NULL", "lines INTEGER NOT NULL", "sha256 TEXT NOT NULL", "object_key TEXT NOT NULL",
              "storage TEXT NOT NULL", "expires_at_us INTEGER NOT NULL", "key_id TEXT NOT NULL",
              "deleted_at_us INTEGER", "expired INTEGER NOT NULL DEFAULT 0"),
    "files_deleted": ("file_id TEXT PRIMARY KEY", "org_id TEXT NOT NULL", "position INTEGER NOT NULL",
                      "expired INTEGER NOT NULL", "deleted_at_us INTEGER NOT NULL"),
    # The log's Merkle tree (ledger.tree): its tiles, and how many leaves it has.
    "merkle_tiles": ("level INTEGER NOT NULL", "idx INTEGER NOT NULL", "hashes BLOB NOT NULL",
                     "PRIMARY KEY (level, idx)"),
    "merkle_tree": ("name TEXT PRIMARY KEY", "size INTEGER NOT NULL"),
    # Each batch (ledger.events.BatchCreated ..), its lines' outcomes summed as they are recorded.
    "batches": ("batch_id TEXT PRIMARY KEY", "org_id TEXT NOT NULL", "position INTEGER NOT NULL",
                "key_id TEXT NOT NULL", "api TEXT NOT NULL", "endpoint TEXT NOT NULL", "model TEXT NOT NULL",
                "provider TEXT NOT NULL", "native INTEGER NOT NULL", "input_file_id TEXT NOT NULL",
                "lines INTEGER NOT NULL", "hold_id TEXT NOT NULL", "completion_window TEXT NOT NULL",
                "metadata TEXT NOT NULL", "created_at_us INTEGER NOT NULL", "expires_at_us INTEGER NOT NULL",
                "upstream_id TEXT NOT NULL", "cancel_requested_at_us INTEGER", "status TEXT NOT NULL",
                "ended_at_us INTEGER", "output_file_id TEXT NOT NULL", "error_file_id TEXT NOT NULL",
                "errors TEXT NOT NULL", "succeeded INTEGER NOT NULL", "failed INTEGER NOT NULL",
                "charged_inr_nano INTEGER NOT NULL", "prompt_tokens INTEGER NOT NULL",
                "completion_tokens INTEGER NOT NULL"),
}

# A music track whose audio is in the bucket and has not been swept: what the partial index
# below holds. Every query for hosted tracks uses this very text, so it can use the index.
HOSTED = "storage = 's3' AND error = 0 AND expired_at_us IS NULL"
# The columns the request log can be filtered by, each with an index in position order, so a
# page of a filtered log costs the same at any depth and any size of history.
LOG_FILTERS = ("route", "model", "status")

# name -> (table, columns, WHERE of a partial index or "").
INDEXES: dict[str, tuple[str, str, str]] = {
    "request_log_by_org": ("request_log", "org_id, position", ""),
    "music_tracks_by_org": ("music_tracks", "org_id, position", ""),
    "holds_by_lapse": ("holds", "lapses_at_us", ""),
    "webhooks_by_org": ("webhooks", "org_id", ""),
    "webhook_deliveries_by_webhook": ("webhook_deliveries", "webhook_id, position", ""),
    "webhook_deliveries_by_message": ("webhook_deliveries", "webhook_id, message_id", ""),
    **{f"request_log_by_{column}": ("request_log", f"org_id, {column}, position", "") for column in LOG_FILTERS},
    # Only what is still due sits in these partial indexes, so a sweep pass costs time in
    # proportion to what it has to do, not to the size of history.
    "music_tracks_hosted": ("music_tracks", "created_at_us", HOSTED),
    "content_kept": ("content", "created_at_us", "body IS NOT NULL"),
    # What a batch's runner reads back (its lines recorded), and the sweeper (files due).
    "request_log_by_batch": ("request_log", "batch_id, custom_id", "batch_id <> ''"),
    "files_kept": ("files", "expires_at_us", "deleted_at_us IS NULL"),
    "files_by_org": ("files", "org_id, position", ""),
    "batches_by_org": ("batches", "org_id, position", ""),
    "batches_running": ("batches", "created_at_us", "ended_at_us IS NULL"),
}

# Indexes that also refuse a second row: a batch's line (its custom_id) is recorded once.
UNIQUE = frozenset({"request_log_by_batch"})

_POSTGRES_TYPES = {"INTEGER": "BIGINT", "BLOB": "BYTEA"}


def is_hosted(storage: str, error: bool, expired_at_us: int | None) -> bool:
    """HOSTED, for a row already read."""
    return storage == "s3" and not error and expired_at_us is None


def _typed(column: str, postgres: bool) -> str:
    if not postgres:
        return column
    return re.sub(r"\b(INTEGER|BLOB)\b", lambda m: _POSTGRES_TYPES[m.group(1)], column, count=1)


def create_tables(*, postgres: bool) -> str:
    """CREATE TABLE IF NOT EXISTS for every table, in the backend's types."""
    return "".join(f"CREATE TABLE IF NOT EXISTS {name} ({', '.join(_typed(c, postgres) for c in columns)});\n"
                   for name, columns in TABLES.items())


def create_indexes(*, partial: bool, tables: Sequence[str] | None = None) -> str:
    """CREATE INDEX IF NOT EXISTS for the plain indexes, or for the partial ones (of `tables`)."""
    return "".join(
        f"CREATE {'UNIQUE ' if name in UNIQUE else ''}INDEX IF NOT EXISTS {name} ON {table} ({columns})"
        + (f" WHERE {where};\n" if where else ";\n")
        for name, (table, columns, where) in INDEXES.items()
        if bool(where) == partial and (tables is None or table in tables))


def drop_indexes(schema: str = "") -> str:
    """DROP INDEX for every index above (in `schema`, when given): a scratch store filled only to
    be compared needs none."""
    prefix = f"{schema}." if schema else ""
    return "".join(f"DROP INDEX IF EXISTS {prefix}{name};\n" for name in INDEXES)


def columns(table: str) -> list[str]:
    """The names of a table's columns, in order."""
    return [c.split()[0] for c in TABLES[table] if not c.startswith(("PRIMARY KEY", "UNIQUE"))]
