"""The SQLite append transaction as one plain function on a `sqlite3` connection.

aiosqlite runs its connection in a thread of its own and hands each call over through a queue,
waking that thread and then the event loop once per statement: eight or so hops per batch, each
costing more of the event loop's time than the statement costs SQLite. The recorder instead
sends this whole function to the connection's thread once (ledger.backends.sqlite), so a batch costs one
hop there and one back. It runs under the write locks the recorder already holds; everything
plan() decides (versions, positions, hashes, holds) is still read and decided inside the
transaction.
"""

import itertools
import sqlite3
from collections.abc import Sequence

from ledger import batches, periods, projections, schema
from ledger.queries import LAST_POSITION
from ledger.recorder import Append, Holds, Outcome, accepted, held_by, holding_keys, holds_taken, plan


SELECT_EVENTS = "SELECT position, stream_id, version, recorded_at_us, type, data, hash FROM events"


def append(db: sqlite3.Connection, units: Sequence[Append], now_us: int) -> list[Outcome]:
    """Plan and write `units` in one IMMEDIATE transaction, recorded at `now_us`: all of them,
    or (raising) none."""
    db.execute("BEGIN IMMEDIATE")
    try:
        heads = _heads(db, {u.stream_id for u in units})
        [(last,)] = db.execute(LAST_POSITION).fetchall()
        outcomes = plan(units, heads, last, now_us, _available(db, units), _room(db, units, now_us),
                        _holds(db, units))
        apply(db, batches.writes(list(accepted(units, outcomes))))
        db.execute("COMMIT")
    except BaseException:
        db.rollback()
        raise
    return outcomes


def apply(db: sqlite3.Connection, runs: Sequence[batches.Run]) -> None:
    """Run each statement over its rows, in order, in the open transaction."""
    for sql, rows in runs:
        db.executemany(sql, rows)


def copy_rows(db: sqlite3.Connection, source: str, tables: Sequence[str]) -> None:
    """Add every row of the attached database `source`'s `tables` to the main database's."""
    db.execute("BEGIN IMMEDIATE")
    try:
        for table in tables:
            columns = ", ".join(schema.columns(table))
            db.execute(f"INSERT INTO main.{table} ({columns}) SELECT {columns} FROM {source}.{table}")
        db.execute("COMMIT")
    except BaseException:
        db.rollback()
        raise


def key_ranges(db: sqlite3.Connection, source: str, table: str, rows: int) -> list[tuple[tuple | None, tuple | None]]:
    """`table`'s keys cut into ranges [low, high) of about `rows` rows of the attached `source`'s
    (None: no bound), together covering every key."""
    keys = projections.TABLES[table]
    cuts = [tuple(row) for row in db.execute(
        f"SELECT {keys} FROM (SELECT {keys}, row_number() OVER (ORDER BY {keys}) AS n FROM {source}.{table})"
        f" WHERE n % ? = 0 ORDER BY {keys}", (rows,))]
    bounds: list[tuple | None] = [None, *cuts, None]
    return list(itertools.pairwise(bounds))


def patch(db: sqlite3.Connection, source: str, table: str, low: tuple | None, high: tuple | None) -> None:
    """Make the main database's `table` equal to the attached `source`'s for the keys from `low` up
    to `high` (None: no bound), in one transaction, writing only the rows that differ (none, for a
    ledger that verifies): those it lacks are deleted, each it holds otherwise is written whole."""
    columns, keys = ", ".join(schema.columns(table)), projections.TABLES[table]
    within, params = _between(keys, low, high)
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute(f"DELETE FROM main.{table} WHERE {within} AND ({keys}) NOT IN"
                   f" (SELECT {keys} FROM {source}.{table} WHERE {within})", params * 2)
        db.execute(f"INSERT OR REPLACE INTO main.{table} ({columns}) SELECT {columns} FROM {source}.{table}"
                   f" WHERE {within} EXCEPT SELECT {columns} FROM main.{table} WHERE {within}", params * 2)
        db.execute("COMMIT")
    except BaseException:
        db.rollback()
        raise


def _between(keys: str, low: tuple | None, high: tuple | None) -> tuple[str, tuple]:
    marks = lambda bound: ", ".join("?" * len(bound))  # noqa: E731
    conditions = [f"({keys}) >= ({marks(low)})"] if low else []
    conditions += [f"({keys}) < ({marks(high)})"] if high else []
    return " AND ".join(conditions) or "1", (*(low or ()), *(high or ()))


def _heads(db: sqlite3.Connection, streams: set[str]) -> dict[str, tuple[int, bytes]]:
    # MAX(version) per named stream is an index lookup, so this costs O(streams), not O(events).
    values = ",".join(["(?)"] * len(streams))
    rows = db.execute(
        f"WITH s(id) AS (VALUES {values}) SELECT e.stream_id, e.version, e.hash FROM s"
        " JOIN events e ON e.stream_id = s.id"
        " AND e.version = (SELECT MAX(version) FROM events WHERE stream_id = s.id)",
        tuple(streams))
    return {stream: (version, digest) for stream, version, digest in rows}


def _available(db: sqlite3.Connection, units: Sequence[Append]) -> dict[str, int]:
    """credits - spent - held of each org that some unit wants to hold credit for."""
    orgs = {u.stream_id for u in units if held_by(u)}
    if not orgs:
        return {}
    rows = db.execute(f"SELECT org_id, {projections.AVAILABLE} FROM orgs WHERE org_id IN"
                      f" ({','.join('?' * len(orgs))})", tuple(orgs))
    return dict(rows.fetchall())



def _holds(db: sqlite3.Connection, units: Sequence[Append]) -> Holds | None:
    """What each hold some unit takes from still holds, and when it lapses (None: none is taken)."""
    if not (taken := holds_taken(units)):
        return None
    rows = db.execute(f"SELECT hold_id, amount_inr_nano, lapses_at_us FROM holds WHERE hold_id IN"
                      f" ({','.join('?' * len(taken))})", tuple(taken))
    return {hold_id: (amount, lapses) for hold_id, amount, lapses in rows}


def _room(db: sqlite3.Connection, units: Sequence[Append], now_us: int) -> dict[str, int]:
    """What each key with a budget that some unit holds credit for may still reserve."""
    if not (keys := holding_keys(units)):
        return {}
    sql = projections.ROOM.format(day="?", month="?", keys=f"IN ({','.join('?' * len(keys))})")
    days = (periods.first_day("day", now_us), periods.first_day("month", now_us))
    return dict(db.execute(sql, (*days, *keys)).fetchall())
