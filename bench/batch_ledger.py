"""What the batch benchmark reads from a ledger directly (the gateway may be running, or dead):
events appended, a batch's lines recorded, and how many times each custom_id was charged.

A SQLite ledger is read with sqlite3 (WAL: readers never block the gateway's writer); a
PostgreSQL one (`...?schema=name`, bench.ledger_check.postgres_ledger) with asyncpg. Events are
JSON (ledger.events.encode_event), so a batch's RequestCompleted events are found by their
`batch_id` field, independently of the request_log projection (whose unique index on
batch_id, custom_id would hide a second charge).
"""

import asyncio
import contextlib
import re
import sqlite3
from collections import Counter

BATCH_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")  # inlined into statements below, so checked first


def _field(ledger_url: str, name: str) -> str:
    """The SQL reading top-level field `name` of an event's JSON data."""
    if ledger_url.startswith("sqlite:///"):
        return f"json_extract(CAST(data AS TEXT), '$.{name}')"
    return f"(convert_from(data, 'UTF8')::json ->> '{name}')"


def rows(ledger_url: str, statement: str) -> list[tuple]:
    """Every row `statement` returns from the ledger."""
    if ledger_url.startswith("sqlite:///"):
        path = ledger_url.removeprefix("sqlite:///")
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)) as db:
            return db.execute(statement).fetchall()
    return asyncio.run(_postgres_rows(ledger_url, statement))


async def _postgres_rows(ledger_url: str, statement: str) -> list[tuple]:
    import asyncpg
    dsn, _, schema = ledger_url.partition("?schema=")
    db = await asyncpg.connect(dsn, server_settings={"search_path": schema or "public"})
    try:
        return [tuple(row) for row in await db.fetch(statement)]
    finally:
        await db.close()


def scalar(ledger_url: str, statement: str) -> int:
    return int(rows(ledger_url, statement)[0][0] or 0)


def last_position(ledger_url: str) -> int:
    """The position of the newest event (0 for an empty ledger)."""
    return scalar(ledger_url, "SELECT MAX(position) FROM events")


def events_after(ledger_url: str, position: int) -> int:
    return scalar(ledger_url, f"SELECT COUNT(*) FROM events WHERE position > {int(position)}")


def _checked(batch_id: str) -> str:
    if not BATCH_ID.fullmatch(batch_id):
        raise ValueError(f"unexpected batch id {batch_id!r}")
    return batch_id


def lines_recorded(ledger_url: str, batch_id: str) -> int:
    """The batch's lines in the request log (each recorded line, charged or refused)."""
    return scalar(ledger_url, f"SELECT COUNT(*) FROM request_log WHERE batch_id = '{_checked(batch_id)}'")


def events_of_batch(ledger_url: str, batch_id: str, event_type: str) -> int:
    """How many events of `event_type` name the batch (batch_submitted, batch_ended, ..)."""
    return scalar(ledger_url, f"SELECT COUNT(*) FROM events WHERE type = '{event_type}'"
                              f" AND {_field(ledger_url, 'batch_id')} = '{_checked(batch_id)}'")


def charges(ledger_url: str, batch_id: str) -> Counter:
    """custom_id -> how many RequestCompleted events of the batch name it, from the events alone."""
    custom_id, batch = _field(ledger_url, "custom_id"), _field(ledger_url, "batch_id")
    found = rows(ledger_url, f"SELECT {custom_id}, COUNT(*) FROM events WHERE type = 'request_completed'"
                             f" AND {batch} = '{_checked(batch_id)}' GROUP BY {custom_id}")
    return Counter(dict(found))


def charged_once(ledger_url: str, batch_id: str, custom_ids: list[str]) -> dict:
    """Whether each of `custom_ids` has exactly one RequestCompleted and nothing else has any."""
    counted = charges(ledger_url, batch_id)
    expected = set(custom_ids)
    missing = [c for c in custom_ids if counted.get(c, 0) == 0]
    twice = sorted(c for c, n in counted.items() if n > 1)
    strangers = sorted(set(counted) - expected)
    return {"ok": not (missing or twice or strangers), "events": sum(counted.values()),
            "missing": missing[:10], "missing_count": len(missing), "twice": twice[:10],
            "twice_count": len(twice), "strangers": strangers[:10]}
