"""The PostgreSQL recorder: the ledger for many processes and replicas, via an asyncpg pool.

Every append and every rebuild takes one transaction-scoped advisory lock first. That is what
keeps the log right under concurrency from any number of processes: versions and hashes are
planned from the stream heads read under the lock, positions are assigned in commit order (so a
reader following positions never skips a row that commits later), and the holds check reads
balances that cannot move until commit. Group commit keeps the lock's cost per event small.
"""

import asyncio
import contextlib
import contextvars
import re
import uuid
from typing import cast
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import asyncpg
import msgspec

from ledger import batches, periods, projections, schema
from ledger.events import decode_event
from ledger.backends import pg_schema, turns
from ledger.turns import Turn
from ledger.backends.pg_writes import Run, SetWriter, numbered
from ledger.partitions import streams_after
from ledger.recorder import (
    SCHEMA_VERSION, Append, CorruptEvent, Outcome, Recorded, Recorder,
    Clock, CommitInDoubt, Holds, RecorderClosed, accepted, held_by, holding_keys, holds_taken, isolating_rejections,
    out_of_date, plan, prefix_range, wall_clock_us,
)
from ledger.backends.timeouts import (
    CONNECT_TIMEOUT_S,
    MIGRATE_TIMEOUT_S,
    STATEMENT_TIMEOUT_S,
    reporting_outages,
    unavailable_on,
)

APPEND_LOCK = 7_381_446_205_117  # pg_advisory_xact_lock key: one writer of the log at a time
TREE_LOCK = APPEND_LOCK + 2  # one grower of the Merkle tree at a time (pg_schema.SCHEMA_LOCK is + 1)
PUT_TILE = ("INSERT INTO merkle_tiles (level, idx, hashes) VALUES ($1, $2, $3)"
            " ON CONFLICT (level, idx) DO UPDATE SET hashes = excluded.hashes")
PUT_TREE_SIZE = ("INSERT INTO merkle_tree (name, size) VALUES ('log', $1)"
                 " ON CONFLICT (name) DO UPDATE SET size = excluded.size")


def begin_append(timeout_s: float) -> str:
    """An append's first round trip: its transaction and the lock (see the module doc), no
    parameters. The server ends the transaction if it waits idle longer than twice the statement
    timeout: a gateway cut off mid-append (a partition) would otherwise keep the lock, and every
    replica's appends with it, until TCP noticed, and a COMMIT held up in the network past that
    can no longer land after its sender gave up on it."""
    idle_ms = max(int(timeout_s * 2000), 1000)
    return (f"BEGIN; SET LOCAL idle_in_transaction_session_timeout = {idle_ms};"
            f" SELECT pg_advisory_xact_lock({APPEND_LOCK})")
SELECT_EVENTS = "SELECT position, stream_id, version, recorded_at_us, type, data, hash FROM events"
# Everything plan() needs, read in one round trip once the lock is held (a statement of its own, so
# its snapshot is taken after the lock): each stream's head (one index probe per stream, however
# long the stream), the last position, the available balance of each org taking a hold, and the
# budget room of each key holding (its period's first days in $4 and $5), and what each hold taken
# from still holds and when it lapses ($6).
READ_UNDER_LOCK = (
    "SELECT 'head', s.stream_id, e.version, e.hash FROM unnest($1::text[]) AS s(stream_id)"
    " CROSS JOIN LATERAL (SELECT version, hash FROM events WHERE stream_id = s.stream_id"
    " ORDER BY version DESC LIMIT 1) AS e"
    " UNION ALL SELECT 'last', NULL, COALESCE(MAX(position), 0), NULL FROM events"
    f" UNION ALL SELECT 'available', org_id, {projections.AVAILABLE}, NULL FROM orgs"
    " WHERE org_id = ANY($2::text[])"
    " UNION ALL SELECT 'room', q.key_id, q.room::bigint, NULL FROM ("
    + projections.ROOM.format(day="$4::bigint", month="$5::bigint", keys="= ANY($3::text[])")
    + ") AS q(key_id, room)"
    " UNION ALL SELECT 'hold', hold_id, amount_inr_nano, NULL FROM holds WHERE hold_id = ANY($6::text[])"
    " UNION ALL SELECT 'lapse', hold_id, lapses_at_us, NULL FROM holds WHERE hold_id = ANY($6::text[])")
REMOVE_TEXT = ("UPDATE content SET body = NULL, removed_at_us = $1 WHERE content_id IN"
               " (SELECT content_id FROM content WHERE body IS NOT NULL AND created_at_us < $2"
               " ORDER BY created_at_us LIMIT $3)")
REMOVE_TEXT_OF = ("UPDATE content SET body = NULL, removed_at_us = $1 WHERE content_id >= $2 AND content_id < $3"
                  " AND body IS NOT NULL")
# A unit breaking a constraint (a request id twice, an amount beyond 64 bits) is rejected alone.
REJECTIONS = (asyncpg.IntegrityConstraintViolationError, asyncpg.DataError, OverflowError)
# Driver failures meaning the database is down, unreachable or too slow, not that a write is wrong.
OUTAGES = (OSError, TimeoutError, asyncpg.PostgresConnectionError, asyncpg.OperatorInterventionError,
           asyncpg.InsufficientResourcesError)


# Every error of the driver; what is not an outage surfaces as ledger.recorder.DatabaseError.
DRIVER_ERRORS = (asyncpg.PostgresError, asyncpg.InterfaceError)


def dsn_and_schema(url: str) -> tuple[str, str]:
    """The connection URL without our `schema` query parameter, and that schema ("public")."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    schema = query.pop("schema", "public")
    if not re.fullmatch(r"[a-z_][a-z0-9_]*", schema):
        raise ValueError(f"invalid schema name {schema!r} in the ledger URL")
    return urlunsplit(parts._replace(query=urlencode(query))), schema


def is_outage(exc: BaseException) -> bool:
    # A bare InterfaceError is about the connection ("connection is closed", "pool is closing");
    # its subclasses are the caller's own mistakes (an argument that does not encode).
    return isinstance(exc, OUTAGES) or type(exc) is asyncpg.InterfaceError


translating = reporting_outages(is_outage, DRIVER_ERRORS)


def _recorded(row: asyncpg.Record) -> Recorded:
    position, stream_id, version, at, kind, data, digest = row
    try:
        event = decode_event(bytes(data))
    except msgspec.DecodeError as exc:
        raise CorruptEvent(f"event at position {position} does not decode: {exc}") from exc
    return Recorded(position, stream_id, version, at, kind, event, bytes(data), bytes(digest))


class PostgresRecorder(Recorder):
    def __init__(self, dsn: str, schema: str = "public", pool_size: int = 10, *,
                 timeout_s: float = STATEMENT_TIMEOUT_S, connect_timeout_s: float = CONNECT_TIMEOUT_S,
                 clock: Clock = wall_clock_us) -> None:
        self._dsn, self.schema, self._pool_size = dsn, schema, pool_size
        self.url = f"{dsn}{'&' if '?' in dsn else '?'}schema={schema}"
        self.clock = clock
        self._timeout_s, self._connect_timeout_s = timeout_s, connect_timeout_s
        self._begin_append = begin_append(timeout_s)
        self._pool: asyncpg.Pool | None = None
        self._sets = SetWriter()
        # The connection of the snapshot the current task is in, if any.
        self._snapshot: contextvars.ContextVar[asyncpg.Connection | None] = contextvars.ContextVar(
            f"snapshot-{id(self)}", default=None)

    @classmethod
    def from_url(cls, url: str, *, timeout_s: float = STATEMENT_TIMEOUT_S,
                 connect_timeout_s: float = CONNECT_TIMEOUT_S, clock: Clock = wall_clock_us) -> "PostgresRecorder":
        dsn, schema = dsn_and_schema(url)
        return cls(dsn, schema, timeout_s=timeout_s, connect_timeout_s=connect_timeout_s, clock=clock)

    @property
    def _open_pool(self) -> asyncpg.Pool:
        """The pool; RecorderClosed before open() and after close()."""
        if self._pool is None:
            raise RecorderClosed(f"the PostgreSQL ledger (schema {self.schema}) is not open")
        return self._pool

    async def open(self, migrate: bool = True) -> None:
        with unavailable_on(is_outage):
            self._pool = await asyncpg.create_pool(
                self._dsn, min_size=1, max_size=self._pool_size, timeout=self._connect_timeout_s,
                command_timeout=self._timeout_s, server_settings={"search_path": self.schema},
                reset=_keep_session)
        try:
            with unavailable_on(is_outage, DRIVER_ERRORS):
                found = await self._prepare(migrate)
        except BaseException:
            await self.close()  # a failed open keeps no pool
            raise
        if found != SCHEMA_VERSION and not migrate:
            await self.close()
            raise out_of_date(found)

    async def _prepare(self, migrate: bool) -> int:
        async with self._connection() as db, db.transaction():
            return await pg_schema.prepare(db, self.schema, migrate)

    async def close(self) -> None:
        if self._pool is None:
            return
        pool, self._pool = self._pool, None
        try:
            await asyncio.wait_for(pool.close(), self._timeout_s)
        except Exception as exc:
            if not is_outage(exc):
                raise
            pool.terminate()  # the database is gone: drop the connections rather than wait for it

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[asyncpg.Connection]:
        """A pooled connection, waited for no longer than the timeout; outages as LedgerUnavailable."""
        with unavailable_on(is_outage):
            async with self._open_pool.acquire(timeout=self._timeout_s) as db:
                try:
                    yield db
                except Exception as exc:
                    if is_outage(exc):
                        db.terminate()  # broken or silent: close it now rather than wait to reset it
                    raise

    @translating
    async def append(self, units: Sequence[Append]) -> list[Outcome]:
        return await isolating_rejections(units, self._append_in_transaction, REJECTIONS)

    async def _append_in_transaction(self, units: Sequence[Append]) -> list[Outcome]:
        """Four round trips, whatever the batch: BEGIN with the lock, the reads plan() needs,
        every write (ledger.backends.pg_writes), COMMIT."""
        async with self._connection() as db, _append_transaction(db, self._begin_append):
            now_us = self.clock()
            heads, last, available, room, holds = await _read_under_lock(db, units, now_us)
            outcomes = plan(units, heads, last, now_us, available, room, holds)
            await self._apply(db, batches.writes(list(accepted(units, outcomes))))
        return outcomes

    async def _apply(self, db: asyncpg.Connection, runs: list[Run]) -> None:
        await self._sets.learn(db, runs)
        for step in self._sets.steps(runs):
            if step.many:
                await db.executemany(step.sql, step.args)
            else:
                await db.execute(step.sql, *step.args)

    @contextlib.asynccontextmanager
    async def _reader(self) -> AsyncIterator[asyncpg.Connection]:
        """The snapshot's connection inside `snapshot()`, otherwise one from the pool."""
        if (held := self._snapshot.get()) is not None:
            yield held
            return
        async with self._connection() as db:
            yield db

    @translating
    async def read(self, after: int = 0, limit: int = 1000) -> list[Recorded]:
        async with self._reader() as db:
            rows = await db.fetch(f"{SELECT_EVENTS} WHERE position > $1 ORDER BY position LIMIT $2", after, limit)
        return [_recorded(row) for row in rows]

    @translating
    async def read_stream(self, stream_id: str) -> list[Recorded]:
        async with self._reader() as db:
            rows = await db.fetch(f"{SELECT_EVENTS} WHERE stream_id = $1 ORDER BY version", stream_id)
        return [_recorded(row) for row in rows]

    @translating
    async def read_streams(self, after: int, span: int, low: str, high: str | None) -> list[Recorded]:
        sql, params = streams_after(SELECT_EVENTS, after, span, low, high)
        async with self._reader() as db:
            rows = await db.fetch(numbered(sql), *params)
        return [_recorded(row) for row in rows]

    @contextlib.asynccontextmanager
    async def exclusive(self) -> AsyncIterator[None]:
        async with self._connection() as db, db.transaction():
            await db.execute("SELECT pg_advisory_xact_lock($1)", APPEND_LOCK)
            yield

    @translating
    async def absorb(self, others: Sequence[Recorder], tables: Sequence[str]) -> None:
        async with self._connection() as db:
            for table in tables:
                columns = ", ".join(schema.columns(table))
                for other in others:
                    await db.execute(f"INSERT INTO {self.schema}.{table} ({columns})"
                                     f" SELECT {columns} FROM {cast(PostgresRecorder, other).schema}.{table}")
            if indexes := schema.create_indexes(partial=False, tables=tables) + schema.create_indexes(
                    partial=True, tables=tables):
                await db.execute(indexes)  # built once, before the swap, not row by row

    @translating
    async def swap_in(self, rebuilt: Recorder, tables: Sequence[str], catch_up: Callable[[], Awaitable[int]]
                      ) -> int:
        source = cast(PostgresRecorder, rebuilt).schema
        async with self.exclusive():  # one step: bring it up to date, then a rename per table
            end = await catch_up()
            async with self._connection() as db, db.transaction():
                for table in tables:  # the rebuilt table, with its indexes, takes the live one's place
                    await db.execute(f"DROP TABLE {self.schema}.{table}")
                    await db.execute(f"ALTER TABLE {source}.{table} SET SCHEMA {self.schema}")
        return end

    @translating
    async def _fetch(self, sql: str, params: Sequence = ()) -> list[tuple]:
        async with self._reader() as db:
            rows = await db.fetch(numbered(sql), *params)  # converted once per statement
        return [tuple(bytes(v) if isinstance(v, memoryview) else v for v in row) for row in rows]

    @translating
    async def remove_text(self, before_us: int, now_us: int, limit: int = 1000) -> int:
        async with self._connection() as db:
            status = await db.execute(REMOVE_TEXT, now_us, before_us, limit)
        return int(status.rpartition(" ")[2])

    @translating
    async def remove_text_of(self, content_prefix: str, now_us: int) -> int:
        async with self._connection() as db:
            status = await db.execute(REMOVE_TEXT_OF, now_us, *prefix_range(content_prefix))
        return int(status.rpartition(" ")[2])

    @translating
    async def put_tiles(self, from_size: int, to_size: int, tiles: Mapping[tuple[int, int], bytes]) -> bool:
        async with self._connection() as db, db.transaction():
            await db.execute("SELECT pg_advisory_xact_lock($1)", TREE_LOCK)  # growers race: one writes
            if (await db.fetchval("SELECT size FROM merkle_tree WHERE name = 'log'") or 0) != from_size:
                return False
            await db.executemany(PUT_TILE, [(level, index, hashes) for (level, index), hashes in tiles.items()])
            await db.execute(PUT_TREE_SIZE, to_size)
        return True

    @translating
    async def rebuild(self, events: AsyncIterable[list[Recorded]]) -> None:
        folder = batches.Folder(deferring=True)
        async with self._connection() as db, db.transaction():
            await self._lock_appends(db)
            async for batch in events:
                await self._apply(db, folder.runs(batch))
            await self._apply(db, folder.flush())

    async def _lock_appends(self, db: asyncpg.Connection) -> None:
        await db.execute("SELECT pg_advisory_xact_lock($1)", APPEND_LOCK)  # no append meanwhile

    @contextlib.asynccontextmanager
    async def snapshot(self) -> AsyncIterator[None]:
        # One REPEATABLE READ transaction pins a snapshot for this task's reads.
        async with self._connection() as db, db.transaction(isolation="repeatable_read", readonly=True):
            await db.fetchval("SELECT 1")  # the snapshot is taken by the first statement, not by BEGIN
            token = self._snapshot.set(db)
            try:
                yield
            finally:
                self._snapshot.reset(token)

    async def take_turn(self, job: str) -> Turn | None:
        with unavailable_on(is_outage, DRIVER_ERRORS):
            return await turns.AdvisoryTurn.take(self._dsn, f"{self.schema}:{job}", self._connect_timeout_s)

    def opener(self) -> Callable[[str], Recorder]:
        return PostgresRecorder.from_url

    def scratch(self) -> "PostgresRecorder":
        return _ScratchPostgresRecorder(self._dsn, f"replay_{uuid.uuid4().hex[:16]}")


async def _keep_session(db: asyncpg.Connection) -> None:
    """What a connection going back to the pool needs beyond asyncpg's own rollback of an open
    transaction: nothing, since no session state is ever set (no SET, LISTEN, cursor or session
    lock). asyncpg's default would send a reset query, a round trip on every release."""


@contextlib.asynccontextmanager
async def _append_transaction(db: asyncpg.Connection, begin: str) -> AsyncIterator[None]:
    """A transaction holding the append lock: BEGIN and the lock in one round trip, then COMMIT
    (a failed statement: ROLLBACK; cancelled mid-statement: the connection is dropped). Until
    COMMIT is sent nothing can be recorded, whatever becomes of the connection; a COMMIT that
    gets no answer may have been (CommitInDoubt)."""
    await db.execute(begin)
    try:
        yield
    except asyncio.CancelledError:
        db.terminate()
        raise
    except Exception as exc:
        if not is_outage(exc):  # an outage's connection is dropped by _connection
            await db.execute("ROLLBACK")
        raise
    try:
        await db.execute("COMMIT")
    except asyncio.CancelledError:
        db.terminate()
        raise
    except Exception as exc:
        if not is_outage(exc):
            raise  # the database answered: it refused the commit, so nothing was recorded
        db.terminate()
        raise CommitInDoubt(f"the ledger database did not answer COMMIT: {type(exc).__name__}: {exc}"[:500]) from exc


async def _read_under_lock(db: asyncpg.Connection, units: Sequence[Append], now_us: int
                           ) -> tuple[dict[str, tuple[int, bytes]], int, dict[str, int], dict[str, int], Holds | None]:
    """Each stream's head, the last position, each holding org's available balance, each
    holding key's budget room at `now_us`, and each taken hold's remainder and lapse."""
    taken = holds_taken(units)
    rows = await db.fetch(READ_UNDER_LOCK, list({u.stream_id for u in units}),
                          list({u.stream_id for u in units if held_by(u)}), list(holding_keys(units)),
                          periods.first_day("day", now_us), periods.first_day("month", now_us), list(taken))
    heads = {stream: (version, bytes(digest)) for kind, stream, version, digest in rows if kind == "head"}
    available = {org: amount for kind, org, amount, _ in rows if kind == "available"}
    room = {key: amount for kind, key, amount, _ in rows if kind == "room"}
    last = next(value for kind, _, value, _ in rows if kind == "last")
    lapses = {hold_id: at for kind, hold_id, at, _ in rows if kind == "lapse"}
    holds = {hold_id: (amount, lapses[hold_id]) for kind, hold_id, amount, _ in rows if kind == "hold"}
    return heads, last, available, room, holds if taken else None


class _ScratchPostgresRecorder(PostgresRecorder):
    """A throwaway schema for verification and replay; dropped when the recorder that made it (its
    owner) is closed. A worker process joins it by URL (`opener`), never owning it. Its statements
    are whole tables at a time (a rebuild is one transaction), so they get the time a migration gets."""

    def __init__(self, dsn: str, schema: str, *, owner: bool = True) -> None:
        super().__init__(dsn, schema, pool_size=2, timeout_s=MIGRATE_TIMEOUT_S)
        self.owner = owner

    @classmethod
    def joined(cls, url: str) -> "PostgresRecorder":
        dsn, schema = dsn_and_schema(url)
        return cls(dsn, schema, owner=False)

    def opener(self) -> Callable[[str], Recorder]:
        return _ScratchPostgresRecorder.joined

    async def _lock_appends(self, db: asyncpg.Connection) -> None:
        """Nobody appends to a scratch store; and the lock (one per database) may be the live
        store's, held by the replay that is bringing this one up to date to swap it in."""

    async def open(self, migrate: bool = True) -> None:
        await super().open(migrate)
        if self.owner:
            async with self._connection() as db:
                await db.execute(schema.drop_indexes(self.schema))  # no query here needs them

    async def close(self) -> None:
        if self._pool is not None and self.owner:
            async with self._connection() as db:
                await db.execute(f"DROP SCHEMA IF EXISTS {self.schema} CASCADE")
        await super().close()
