"""PostgreSQL: a batch's writes as few statements, each applying a whole run of rows at once.

The projections (ledger.projections) say in portable per-row SQL what each event changes. Run row
by row, a batch of a thousand requests costs thousands of statement executions and a round trip
per table. Here a run of rows becomes one set-based statement reading its rows from arrays
(`unnest`), and runs on different tables share one statement (data-modifying WITH), so a batch
of requests is written in one round trip, whatever its size.

A set applies like its rows one after another only when no two rows change the same row: true of
plain inserts (a duplicate key fails either way), of deletes, of a run of one row, and of the
statements ledger.projections folds to one row per key (FOLDED). Any other run goes row by row.
The statements of one WITH share a snapshot and do not see each other's changes, so runs share
one only when each names a single table and no two the same table.
"""

import functools
import re
from collections.abc import Sequence
from typing import NamedTuple

import asyncpg

from ledger import batches, projections

Run = tuple[str, list[tuple]]  # a qmark statement and the parameters of each of its rows
TABLES = frozenset({*projections.TABLES, "events", "content", "secrets"})
_QMARK = re.compile(r"\?")
_WORD = re.compile(r"\w+")
_INSERT = re.compile(r"(INSERT INTO \w+ \([^()]*\)) VALUES \(([^()]*)\)(.*)", re.S)
_UPDATE = re.compile(r"(UPDATE \w+ SET .*?) WHERE (.*)", re.S)
_DELETE = re.compile(r"(DELETE FROM \w+) WHERE (.*)", re.S)


class Step(NamedTuple):
    sql: str
    args: list  # the statement's arguments; with `many`, one tuple of them per row
    many: bool = False


@functools.cache  # the statements are the module constants and fetch()'s few queries
def numbered(sql: str) -> str:
    """qmark placeholders (the portable form the projections use) as PostgreSQL's $1, $2, ..."""
    counter = iter(range(1, sql.count("?") + 1))
    return _QMARK.sub(lambda _: f"${next(counter)}", sql)


def tables_in(sql: str) -> frozenset[str]:
    return frozenset(_WORD.findall(sql)) & TABLES


def applies_as_set(sql: str, rows: Sequence[tuple]) -> bool:
    """Whether applying `rows` as one set is the same as applying them one after another."""
    return len(rows) == 1 or any_rows_as_set(sql)


@functools.cache  # a fact of the statement alone: worked out once, not per run per batch
def any_rows_as_set(sql: str) -> bool:
    """Whether every run of `sql` applies as a set, however many rows: a plain insert (a
    duplicate key fails either way), a delete, a statement folded to one row per key."""
    plain_insert = sql.startswith("INSERT") and "ON CONFLICT" not in sql
    return plain_insert or sql.startswith("DELETE") or sql in batches.FOLDED


def set_form(sql: str, types: Sequence[str], first: int = 1) -> str | None:
    """`sql` applied to every row of the arrays ${first}, ${first + 1}, ... (one per parameter,
    of `types`); None for a statement of another shape than INSERT ... VALUES, UPDATE, DELETE."""
    names = [f"p{n}" for n in range(1, len(types) + 1)]
    arrays = ", ".join(f"${first + n}::{kind}[]" for n, kind in enumerate(types))
    rows = f"unnest({arrays}) AS batch({', '.join(names)})"
    fields = iter(names)
    own = _QMARK.sub(lambda _: f"batch.{next(fields)}", sql)
    if match := _INSERT.fullmatch(own):
        return f"{match[1]} SELECT {match[2]} FROM {rows}{match[3]}"
    if match := _UPDATE.fullmatch(own):
        return f"{match[1]} FROM {rows} WHERE {match[2]}"
    if match := _DELETE.fullmatch(own):
        return f"{match[1]} USING {rows} WHERE {match[2]}"
    return None


class SetWriter:
    """Turns a batch's runs into steps; knows each statement's parameter types (asked of the
    database once per statement) and remembers the statements it composed."""

    def __init__(self) -> None:
        self._types: dict[str, tuple[str, ...]] = {}
        self._settable: dict[str, bool] = {}  # statement -> whether it has a set form
        self._composed: dict[tuple[str, ...], str] = {}  # statements in a group -> its SQL
        self._tables: dict[str, frozenset[str]] = {}

    async def learn(self, db: asyncpg.Connection, runs: Sequence[Run]) -> None:
        """Ask the database the parameter types of statements not seen before."""
        for sql, _ in runs:
            if sql not in self._types:
                prepared = await db.prepare(numbered(sql))
                self._types[sql] = tuple(kind.name for kind in prepared.get_parameters())

    def steps(self, runs: Sequence[Run]) -> list[Step]:
        steps: list[Step] = []
        group: list[Run] = []
        for sql, rows in (run for run in runs if run[1]):
            as_set = applies_as_set(sql, rows) and self._has_set_form(sql)
            if group and not (as_set and self._joins(group, sql)):
                steps.append(self._together(group))
                group = []
            if as_set:
                group.append((sql, rows))
            else:
                steps.append(Step(numbered(sql), rows, many=True))
        if group:
            steps.append(self._together(group))
        return steps

    def _has_set_form(self, sql: str) -> bool:
        if sql not in self._settable:
            self._settable[sql] = set_form(sql, self._types[sql]) is not None
        return self._settable[sql]

    def _joins(self, group: Sequence[Run], sql: str) -> bool:
        """Whether `sql` may share the group's statement: one table, which no run there names."""
        tables = self._tables_in(sql)
        return len(tables) == 1 and not any(tables & self._tables_in(other) for other, _ in group)

    def _tables_in(self, sql: str) -> frozenset[str]:
        if sql not in self._tables:
            self._tables[sql] = tables_in(sql)
        return self._tables[sql]

    def _together(self, group: Sequence[Run]) -> Step:
        """One statement applying every run of `group` as a set."""
        shape = tuple(sql for sql, _ in group)
        if shape not in self._composed:
            self._composed[shape] = self._compose(shape)
        return Step(self._composed[shape], [list(column) for _, rows in group for column in zip(*rows, strict=True)])

    def _compose(self, shape: Sequence[str]) -> str:
        parts, first = [], 1
        for sql in shape:
            part = set_form(sql, self._types[sql], first)
            if part is None:  # steps() groups only statements _has_set_form accepted
                raise ValueError(f"no set form for {sql!r}")
            parts.append(part)
            first += len(self._types[sql])
        if len(parts) == 1:
            return parts[0]
        return "WITH " + ", ".join(f"w{n} AS ({part})" for n, part in enumerate(parts)) + " SELECT 1"
