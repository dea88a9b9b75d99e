"""A batch of recorded events as SQL runs: what an append writes, and what a replay applies.

The projections (ledger.projections) say per event which statements run. A batch runs them in
phases (rows are created before anything updates them), and the statements that only add to a row
(or keep its latest instant) are folded to one write per row they change, gathered where the
first of their kind falls: they commute with every other statement of their phase, so moving them
up changes nothing. A replay folds harder (`Folder(deferring=True)`): what no statement ever reads
back (balances, counters, the daily rollups) is carried from batch to batch and written once,
so a big org's balance row is written once per replay, not once per batch.
"""

from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple

from ledger import projections as p
from ledger.recorder import Append, Recorded, Secret

Run = tuple[str, list[tuple]]  # a qmark statement and the parameters of each of its rows
PHASES = 6  # ledger.projections.CREATE .. ROLLUP
DEFERRED_ROWS = 200_000  # rows a replay carries between batches before it writes them anyway


class Fold(NamedTuple):
    key: slice  # the parameters naming the row the statement changes
    combine: Callable[[tuple, tuple], tuple]  # two statements' parameters for one row, as one


def _adding(sql: str, key: slice) -> Fold:
    """Additions to one row summed, the parameters naming the row kept as they are. The sum is one
    tuple expression compiled once per statement: a replay calls it for nearly every event."""
    terms = [f"a[{i}]" if key.start <= i < key.stop else f"a[{i}] + b[{i}]" for i in range(sql.count("?"))]
    return Fold(key, eval(f"lambda a, b: ({', '.join(terms)},)"))  # built from indexes alone


def _summed_hold(a: tuple, b: tuple) -> tuple:
    """PUT_HOLD's rows for one hold: the amounts added up, the latest hold's lapse (its position)."""
    latest = a if a[5] >= b[5] else b
    return (*latest[:3], a[3] + b[3], *latest[4:])


# Statements whose rows of one batch fold into one per row they change, the tables coming out the
# same. A run of them changes each row once, so it can also be applied as one set (see
# ledger.backends.pg_writes).
FOLDED: dict[str, Fold] = {
    p.ADD_SPEND: _adding(p.ADD_SPEND, slice(3, 4)), p.PUT_HOLD: Fold(slice(0, 1), _summed_hold),
    p.TAKE_HOLD: _adding(p.TAKE_HOLD, slice(1, 2)), p.DROP_EMPTY_HOLD: Fold(slice(0, 1), lambda a, b: a),
    # RENEW_HOLD's second parameter is its position; TOUCH_KEY's parameters start with the instant.
    p.RENEW_HOLD: Fold(slice(2, 3), lambda a, b: a if a[1] >= b[1] else b),
    p.ADD_HELD: _adding(p.ADD_HELD, slice(1, 2)), p.ADD_CREDITS: _adding(p.ADD_CREDITS, slice(1, 2)),
    p.ADD_DAILY_USAGE: _adding(p.ADD_DAILY_USAGE, slice(0, 5)), p.TOUCH_KEY: Fold(slice(1, 3), max),
    p.ADD_KEY_HELD: _adding(p.ADD_KEY_HELD, slice(1, 3)), p.ADD_KEY_SPEND: _adding(p.ADD_KEY_SPEND, slice(0, 3)),
    p.ADD_CHARGES: _adding(p.ADD_CHARGES, slice(0, 5)), p.ADD_BALANCE: _adding(p.ADD_BALANCE, slice(0, 2)),
    p.ADD_BATCH_LINE: _adding(p.ADD_BATCH_LINE, slice(5, 7)),
}
# Folded statements whose columns no statement reads: a replay may write them at any later point.
DEFERRABLE = frozenset({p.ADD_SPEND, p.ADD_HELD, p.ADD_CREDITS, p.ADD_KEY_HELD, p.TOUCH_KEY,
                        p.ADD_DAILY_USAGE, p.ADD_KEY_SPEND, p.ADD_CHARGES, p.ADD_BALANCE})


class Folder:
    """Folds batches of events into runs. With `deferring`, DEFERRABLE rows are kept across
    batches (at most DEFERRED_ROWS of them) until `flush`."""

    def __init__(self, *, deferring: bool = False, limit: int | None = None) -> None:
        self.deferring, self.limit = deferring, DEFERRED_ROWS if limit is None else limit
        self.deferred: dict[str, dict[tuple, tuple]] = {}

    def runs(self, recorded: Iterable[Recorded]) -> list[Run]:
        """The batch's runs in phase order (the deferred rows too, once there are too many)."""
        phases: list[list[tuple[str, tuple] | str]] = [[] for _ in range(PHASES)]
        folded: dict[str, dict[tuple, tuple]] = {}  # this batch's folded SQL -> row key -> params
        deferred = self.deferred if self.deferring else {}
        for r in recorded:
            for phase, sql, params in p.statements(r):  # one loop, no call per statement: the hot path
                if (fold := FOLDED.get(sql)) is None:
                    phases[phase].append((sql, params))
                    continue
                if sql in deferred or (self.deferring and sql in DEFERRABLE):
                    rows = deferred.setdefault(sql, {})
                elif sql in folded:
                    rows = folded[sql]
                else:
                    rows = folded[sql] = {}
                    phases[phase].append(sql)  # where the first of its kind falls
                key = params[fold.key]
                rows[key] = params if (before := rows.get(key)) is None else fold.combine(before, params)
        runs = _joined(_expanded(phases, folded))
        if sum(map(len, self.deferred.values())) > self.limit:
            runs += self.flush()
        return runs

    def flush(self) -> list[Run]:
        """The deferred rows, written now."""
        runs = [(sql, list(rows.values())) for sql, rows in self.deferred.items() if rows]
        self.deferred = {}
        return runs


def _expanded(phases: list[list], folded: dict[str, dict[tuple, tuple]]) -> Iterable[tuple[str, tuple]]:
    for phase in phases:
        for item in phase:
            if isinstance(item, tuple):
                yield item
            else:
                yield from ((item, params) for params in folded[item].values())


def _joined(pairs: Iterable[tuple[str, tuple]]) -> list[Run]:
    """Consecutive statements of one SQL as one run."""
    runs: list[Run] = []
    for sql, params in pairs:
        if runs and runs[-1][0] == sql:
            runs[-1][1].append(params)
        else:
            runs.append((sql, [params]))
    return runs


def grouped(recorded: Iterable[Recorded]) -> list[Run]:
    """The statements for a batch, phase-ordered and folded into (sql, [params]) runs."""
    return Folder().runs(recorded)


# What an append writes beside the projections, in the same portable form (qmark, one row per
# parameter tuple), so that ledger.backends.pg_writes applies these as sets too.
INSERT_EVENT = ("INSERT INTO events (position, stream_id, version, type, recorded_at_us, data, hash)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)")
INSERT_CONTENT = ("INSERT INTO content (content_id, stream_id, sha256, body, created_at_us)"
                  " VALUES (?, ?, ?, ?, ?)")
PUT_SECRET = ("INSERT INTO secrets (stream_id, name, sealed) VALUES (?, ?, ?)"
              " ON CONFLICT (stream_id, name) DO UPDATE SET sealed = excluded.sealed")
DROP_SECRET = "DELETE FROM secrets WHERE stream_id = ? AND name = ?"


def writes(units: Sequence[tuple[Append, list[Recorded]]]) -> list[Run]:
    """Every write of an append's accepted units (recorder.accepted), as (sql, [params]) runs in
    the order both backends run them: the events, their content, each secret, the projections."""
    recorded = [r for _, rs in units for r in rs]
    runs: list[Run] = [(INSERT_EVENT, [
        (r.position, r.stream_id, r.version, r.kind, r.recorded_at_us, r.data, r.hash) for r in recorded])]
    contents = [(c.content_id, u.stream_id, c.sha256, c.body, rs[0].recorded_at_us)
                for u, rs in units for c in u.contents]
    if contents:
        runs.append((INSERT_CONTENT, contents))
    runs += [_secret_run(unit.stream_id, secret) for unit, _ in units for secret in unit.secrets]
    return runs + grouped(recorded)


def _secret_run(stream_id: str, secret: Secret) -> Run:
    if secret.sealed is None:
        return DROP_SECRET, [(stream_id, secret.name)]
    return PUT_SECRET, [(stream_id, secret.name, secret.sealed)]
