"""The SQLite ledger's schema: created, or brought up from an earlier version, once.

Tables and indexes are ledger.schema's; the triggers that refuse changes to events and the
column upgrades of earlier versions are SQLite's own, here.
"""

import time

import aiosqlite

from ledger import backfills, schema
from ledger.projections import slice_held
from ledger.recorder import CURRENT_VERSION, SCHEMA_VERSION, SCHEMA_VERSIONS, out_of_date

# The triggers are SQLite's own; tables and indexes are ledger.schema's. The partial indexes
# come after the upgrade (ledger.schema.create_indexes), which adds the columns they cover.
SCHEMA = schema.create_tables(postgres=False) + """
CREATE TRIGGER IF NOT EXISTS events_are_immutable BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, 'ledger events are immutable'); END;
CREATE TRIGGER IF NOT EXISTS events_are_permanent BEFORE DELETE ON events
BEGIN SELECT RAISE(ABORT, 'ledger events cannot be deleted'); END;
""" + schema.create_indexes(partial=False)
INDEXES = schema.create_indexes(partial=True)

# Content written before it carried its time takes the time of the row that references it.
BACKFILL_CONTENT_TIMES = (
    "ALTER TABLE content ADD COLUMN created_at_us INTEGER NOT NULL DEFAULT 0",
    ("UPDATE content SET created_at_us = COALESCE("
     " (SELECT created_at_us FROM request_log r WHERE r.content_id = content.content_id),"
     " (SELECT created_at_us FROM music_tracks m WHERE content.content_id"
     " IN (m.prompt_content_id, m.text_content_id)), 0)"))


async def prepare(db: aiosqlite.Connection, migrate: bool) -> None:
    """Create or upgrade the schema (`migrate`), or check it is current."""
    if migrate:
        await _create_or_migrate(db)
    elif (found := await _version(db)) != SCHEMA_VERSION:
        raise out_of_date(found)


async def _create_or_migrate(db: aiosqlite.Connection) -> None:
    # Under open's exclusive turn, which waits for another process's upgrade as long as an
    # upgrade may take, not just as long as one write may.
    await db.executescript(SCHEMA)
    await _migrate(db)
    await db.executescript(INDEXES)


async def _version(db: aiosqlite.Connection) -> int:
    await db.execute(SCHEMA_VERSIONS)  # an empty table is version 0: nothing to do
    [(version,)] = await db.execute_fetchall(CURRENT_VERSION)
    return version


async def _migrate(db: aiosqlite.Connection) -> None:
    """Bring a ledger made by an earlier version up to this schema, once."""
    if await _version(db) >= SCHEMA_VERSION:
        return  # current: nothing to write, so no SQLite write transaction is begun
    await db.execute("BEGIN IMMEDIATE")  # another process may be opening the same file
    try:
        if await _version(db) < SCHEMA_VERSION:  # it may have migrated while we waited
            await _upgrade(db, await _version(db))
            await db.execute("INSERT INTO ledger_schema (version, applied_at_us) VALUES (?, ?)",
                             (SCHEMA_VERSION, time.time_ns() // 1000))
        await db.commit()
    except BaseException:
        await db.rollback()
        raise


async def _upgrade(db: aiosqlite.Connection, found: int) -> None:
    if not await _has_column(db, "content", "created_at_us"):
        for statement in BACKFILL_CONTENT_TIMES:
            await db.execute(statement)
    if not await _has_column(db, "api_keys", "last_used_at_us"):
        await db.execute("ALTER TABLE api_keys ADD COLUMN last_used_at_us INTEGER")
    if not await _has_column(db, "idempotency_keys", "running_until_us"):  # v6; older rows are settled
        await db.execute("ALTER TABLE idempotency_keys ADD COLUMN running_until_us INTEGER NOT NULL DEFAULT 0")
    if not await _has_column(db, "api_keys", "held_inr_nano"):  # v7; older holds name no key
        await db.execute("ALTER TABLE api_keys ADD COLUMN held_inr_nano INTEGER NOT NULL DEFAULT 0")
    if not await _has_column(db, "request_log", "anomaly"):  # v8
        await db.execute("ALTER TABLE request_log ADD COLUMN anomaly TEXT NOT NULL DEFAULT ''")
    if not await _has_column(db, "balance_daily", "escrow_inr_nano"):  # v11
        await db.execute("ALTER TABLE balance_daily ADD COLUMN escrow_inr_nano INTEGER NOT NULL DEFAULT 0")
    for column in ("price_version", "price_tier"):  # v12; no older event names either
        if not await _has_column(db, "request_log", column):
            await db.execute(f"ALTER TABLE request_log ADD COLUMN {column} TEXT NOT NULL DEFAULT ''")
    for column in ("batch_id", "custom_id"):  # v13; no older event names either
        if not await _has_column(db, "request_log", column):
            await db.execute(f"ALTER TABLE request_log ADD COLUMN {column} TEXT NOT NULL DEFAULT ''")
    for statement in backfills.due(found, _json_field, DRAWN, SLICED):
        await db.execute(statement)


# The sum of a request_completed event's draws (ledger.backfills.BACKFILL_V9); NULL without any.
DRAWN = ("(SELECT SUM(CAST(json_extract(d.value, '$.amount_inr_nano') AS BIGINT))"
         " FROM json_each(CAST(data AS TEXT), '$.draws') AS d)")
# The same of its draws from escrow slices (ledger.backfills.BACKFILL_V11).
SLICED = DRAWN[:-1] + " WHERE " + slice_held("json_extract(d.value, '$.hold_id')") + ")"


def _json_field(name: str) -> str:
    return f"json_extract(CAST(data AS TEXT), '$.{name}')"


async def _has_column(db: aiosqlite.Connection, table: str, column: str) -> bool:
    columns = await db.execute_fetchall(f"PRAGMA table_info({table})")
    return any(row[1] == column for row in columns)
