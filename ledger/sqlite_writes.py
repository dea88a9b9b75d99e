"""The SQLite append transaction as one plain function on a `sqlite3` connection.

aiosqlite runs its connection in a thread of its own and hands each call over through a queue,
waking that thread and then the event loop once per statement: eight or so hops per batch, each
costing more of the event loop's time than the statement costs SQLite. The recorder instead
sends this whole function to the connection's thread once (ledger.sqlite), so a batch costs one
hop there and one back. It runs under the write locks the recorder already holds; everything
plan() decides (versions, positions, hashes, holds) is still read and decided inside the
transaction.
"""

import sqlite3
from collections.abc import Sequence

from ledger import projections
from ledger.queries import LAST_POSITION
from ledger.recorder import Append, Outcome, accepted, held_by, plan

def append(db: sqlite3.Connection, units: Sequence[Append]) -> list[Outcome]:
    """Plan and write `units` in one IMMEDIATE transaction: all of them, or (raising) none."""
    db.execute("BEGIN IMMEDIATE")
    try:
        heads = _heads(db, {u.stream_id for u in units})
        [(last,)] = db.execute(LAST_POSITION).fetchall()
        outcomes = plan(units, heads, last, available=_available(db, units))
        for sql, rows in projections.writes(list(accepted(units, outcomes))):
            db.executemany(sql, rows)
        db.execute("COMMIT")
    except BaseException:
        db.rollback()
        raise
    return outcomes


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

