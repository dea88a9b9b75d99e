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
from ledger.recorder import Append, Outcome, Recorded, Secret, accepted, held_by, plan

INSERT_EVENT = ("INSERT INTO events (position, stream_id, version, type, recorded_at_us, data, hash)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)")
INSERT_CONTENT = ("INSERT INTO content (content_id, stream_id, sha256, body, created_at_us)"
                  " VALUES (?, ?, ?, ?, ?)")
PUT_SECRET = ("INSERT INTO secrets (stream_id, name, sealed) VALUES (?, ?, ?)"
              " ON CONFLICT (stream_id, name) DO UPDATE SET sealed = excluded.sealed")
DROP_SECRET = "DELETE FROM secrets WHERE stream_id = ? AND name = ?"
LAST_POSITION = "SELECT COALESCE(MAX(position), 0) FROM events"


def append(db: sqlite3.Connection, units: Sequence[Append]) -> list[Outcome]:
    """Plan and write `units` in one IMMEDIATE transaction: all of them, or (raising) none."""
    db.execute("BEGIN IMMEDIATE")
    try:
        heads = _heads(db, {u.stream_id for u in units})
        [(last,)] = db.execute(LAST_POSITION).fetchall()
        outcomes = plan(units, heads, last, available=_available(db, units))
        _write(db, list(accepted(units, outcomes)))
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


def _write(db: sqlite3.Connection, units: list[tuple[Append, list[Recorded]]]) -> None:
    recorded = [r for _, rs in units for r in rs]
    db.executemany(INSERT_EVENT, [(r.position, r.stream_id, r.version, r.kind, r.recorded_at_us, r.data, r.hash)
                                  for r in recorded])
    contents = [(c.content_id, u.stream_id, c.sha256, c.body, rs[0].recorded_at_us)
                for u, rs in units for c in u.contents]
    if contents:
        db.executemany(INSERT_CONTENT, contents)
    for unit, _ in units:
        for secret in unit.secrets:
            db.execute(*_secret_statement(unit.stream_id, secret))
    for sql, params in projections.grouped(recorded):
        db.executemany(sql, params)


def _secret_statement(stream_id: str, secret: Secret) -> tuple[str, tuple]:
    if secret.sealed is None:
        return DROP_SECRET, (stream_id, secret.name)
    return PUT_SECRET, (stream_id, secret.name, secret.sealed)
