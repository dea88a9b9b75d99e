"""The PostgreSQL ledger's schema: created, or brought up from an earlier version, once.

Tables and indexes are ledger.schema's; the trigger that refuses changes to events and the
column upgrades of earlier versions are PostgreSQL's own, here.
"""

import time

import asyncpg

from ledger import backfills, schema
from ledger.projections import slice_held
from ledger.backends.timeouts import MIGRATE_TIMEOUT_S
from ledger.recorder import CURRENT_VERSION, SCHEMA_VERSION, SCHEMA_VERSIONS

# The advisory lock of a migrating open (postgres.APPEND_LOCK + 1): concurrent CREATE ... IF NOT
# EXISTS can still collide.
SCHEMA_LOCK = 7_381_446_205_118

# Tables and indexes are ledger.schema's; the trigger and the column upgrades are PostgreSQL's.
SCHEMA = schema.create_tables(postgres=True) + """
CREATE OR REPLACE FUNCTION ledger_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'ledger events are immutable and permanent'; END $$;
DROP TRIGGER IF EXISTS events_are_immutable ON events;
CREATE TRIGGER events_are_immutable BEFORE UPDATE OR DELETE OR TRUNCATE ON events
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
ALTER TABLE api_keys ADD COLUMN IF NOT EXISTS last_used_at_us BIGINT;
ALTER TABLE idempotency_keys ADD COLUMN IF NOT EXISTS running_until_us BIGINT NOT NULL DEFAULT 0;
ALTER TABLE api_keys ADD COLUMN IF NOT EXISTS held_inr_nano BIGINT NOT NULL DEFAULT 0;
ALTER TABLE request_log ADD COLUMN IF NOT EXISTS anomaly TEXT NOT NULL DEFAULT '';
ALTER TABLE balance_daily ADD COLUMN IF NOT EXISTS escrow_inr_nano BIGINT NOT NULL DEFAULT 0;
ALTER TABLE request_log ADD COLUMN IF NOT EXISTS price_version TEXT NOT NULL DEFAULT '';
ALTER TABLE request_log ADD COLUMN IF NOT EXISTS price_tier TEXT NOT NULL DEFAULT '';
ALTER TABLE request_log ADD COLUMN IF NOT EXISTS batch_id TEXT NOT NULL DEFAULT '';
ALTER TABLE request_log ADD COLUMN IF NOT EXISTS custom_id TEXT NOT NULL DEFAULT '';
""" + schema.create_indexes(partial=False) + schema.create_indexes(partial=True)

# The sum of a request_completed event's draws (ledger.backfills.BACKFILL_V9); NULL without any.
DRAWN = ("(SELECT SUM((d ->> 'amount_inr_nano')::bigint)"
         " FROM jsonb_array_elements(convert_from(data, 'UTF8')::jsonb -> 'draws') AS d)")
# The same of its draws from escrow slices (ledger.backfills.BACKFILL_V11).
SLICED = DRAWN[:-1] + " WHERE " + slice_held("(d ->> 'hold_id')") + ")"


async def prepare(db: asyncpg.Connection, schema_name: str, migrate: bool) -> int:
    """The store's schema version, after bringing it up to date when `migrate` (one process at a
    time: the advisory lock), inside the caller's transaction."""
    await db.execute("SELECT pg_advisory_xact_lock($1)", SCHEMA_LOCK, timeout=MIGRATE_TIMEOUT_S)
    found = await _version(db)
    if found < SCHEMA_VERSION and migrate:
        await db.execute(f"CREATE SCHEMA IF NOT EXISTS {schema_name}")
        await db.execute(SCHEMA, timeout=MIGRATE_TIMEOUT_S)
        for statement in backfills.due(found, _json_field, DRAWN, SLICED):  # a new store: nothing to fill
            await db.execute(statement, timeout=MIGRATE_TIMEOUT_S)
        await db.execute(SCHEMA_VERSIONS)
        await db.execute("INSERT INTO ledger_schema (version, applied_at_us) VALUES ($1, $2)",
                         SCHEMA_VERSION, time.time_ns() // 1000)
    return found


async def _version(db: asyncpg.Connection) -> int:
    exists = await db.fetchval("SELECT to_regclass('ledger_schema') IS NOT NULL")
    return await db.fetchval(CURRENT_VERSION) if exists else 0


def _json_field(name: str) -> str:
    return f"(convert_from(data, 'UTF8')::jsonb ->> '{name}')"
