"""The SQLite recorder: the embedded default, via aiosqlite, in WAL mode with synchronous=FULL.

Two connections: one writer and one reader, which WAL lets read a consistent snapshot while a
write is in flight. Every write transaction first takes the ledger's inter-process write lock
(ledger.backends.write_lock, a flock beside the file), then SQLite's own with BEGIN IMMEDIATE: processes
writing one file (workers, the admin CLI) queue in the kernel, and each is woken the moment the
one before it commits, instead of sleeping in SQLite's busy handler between tries.
"""

import asyncio
import contextlib
import contextvars
import os
import sqlite3
import tempfile
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple, cast

import aiosqlite
import msgspec

from ledger import batches, schema
from ledger.backends import sqlite_schema, sqlite_writes
from ledger.backends.sqlite_writes import SELECT_EVENTS
from ledger.partitions import streams_after
from ledger.events import decode_event
from ledger.recorder import (
    Append, Clock, CorruptEvent, Outcome, Recorded, Recorder, RecorderClosed, isolating_rejections,
    prefix_range, wall_clock_us,
)
from ledger.backends.timeouts import MIGRATE_TIMEOUT_S, STATEMENT_TIMEOUT_S, reporting_outages, unavailable_on
from ledger.turns import Turn
from ledger.backends import turns, write_lock

REMOVE_TEXT = ("UPDATE content SET body = NULL, removed_at_us = ? WHERE content_id IN"
               " (SELECT content_id FROM content WHERE body IS NOT NULL AND created_at_us < ?"
               " ORDER BY created_at_us LIMIT ?)")
PUT_TILE = ("INSERT INTO merkle_tiles (level, idx, hashes) VALUES (?, ?, ?)"
            " ON CONFLICT (level, idx) DO UPDATE SET hashes = excluded.hashes")
PUT_TREE_SIZE = ("INSERT INTO merkle_tree (name, size) VALUES ('log', ?)"
                 " ON CONFLICT (name) DO UPDATE SET size = excluded.size")
REMOVE_TEXT_OF = ("UPDATE content SET body = NULL, removed_at_us = ? WHERE content_id >= ? AND content_id < ?"
                  " AND body IS NOT NULL")
_COLUMN_TYPES = (int, str, int, int, str, bytes, bytes)  # of a SELECT_EVENTS row
# Result codes meaning the database cannot be used right now (still locked after the wait, disk
# full or failing, file unreadable), as opposed to a statement that is wrong.
OUTAGE_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_FULL,
                          sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PROTOCOL,
                          sqlite3.SQLITE_NOMEM})


# Every error of the driver; what is not an outage surfaces as ledger.recorder.DatabaseError.
DRIVER_ERRORS = (sqlite3.Error,)


def is_outage(exc: BaseException) -> bool:
    if isinstance(exc, sqlite3.OperationalError):
        return (getattr(exc, "sqlite_errorcode", 0) & 0xFF) in OUTAGE_CODES  # extended -> primary code
    return isinstance(exc, (OSError, TimeoutError))


translating = reporting_outages(is_outage, DRIVER_ERRORS)


def path_of(url: str) -> str:
    """The file path of a `sqlite:///relative` or `sqlite:////absolute` URL."""
    if not url.startswith("sqlite:///"):
        raise ValueError(f"not a sqlite URL: {url!r} (expected sqlite:///path)")
    return url.removeprefix("sqlite:///") or ":memory:"


def _row_to_recorded(row: Sequence[Any]) -> Recorded:
    position, stream_id, version, at, kind, data, digest = row
    if tuple(map(type, row)) != _COLUMN_TYPES:
        # SQLite keeps whatever type is written, e.g. text from an UPDATE using replace()
        raise CorruptEvent(f"event at position {position} has a column of the wrong type:"
                           f" {tuple(type(value).__name__ for value in row)}")
    try:
        event = decode_event(data)
    except msgspec.DecodeError as exc:
        raise CorruptEvent(f"event at position {position} does not decode: {exc}") from exc
    return Recorded(position, stream_id, version, at, kind, event, data, digest)


PATCHED_ROWS = 20_000  # rows of a table a replay's swap compares (and writes, where they differ) per lock held


class _Connections(NamedTuple):
    """An open recorder's two connections (for `:memory:`, one: each connection is a database)."""

    writer: aiosqlite.Connection
    reader: aiosqlite.Connection


class SQLiteRecorder(Recorder):
    def __init__(self, path: str, *, timeout_s: float = STATEMENT_TIMEOUT_S, clock: Clock = wall_clock_us) -> None:
        self.path = path
        self.url = f"sqlite:///{path}"
        self.clock = clock
        self._timeout_s = timeout_s  # how long a write waits for another process's write lock
        self._connections: _Connections | None = None  # while open
        # aiosqlite serialises calls per connection but not transactions: one at a time.
        self._write_lock = asyncio.Lock()
        self._file_lock = write_lock.beside(path) if path != ":memory:" else None
        # A snapshot's reads go to a connection of its own, in the task that took it: the shared
        # reader stays current for everyone else (a server's directory, balances, request log).
        self._snapshot: contextvars.ContextVar[aiosqlite.Connection | None] = contextvars.ContextVar(
            f"sqlite_snapshot_{id(self)}", default=None)

    @classmethod
    def from_url(cls, url: str, *, timeout_s: float = STATEMENT_TIMEOUT_S, clock: Clock = wall_clock_us
                 ) -> "SQLiteRecorder":
        return cls(path_of(url), timeout_s=timeout_s, clock=clock)

    @property
    def _reader(self) -> aiosqlite.Connection:
        """Where this task reads: its snapshot's connection, if it holds one, else the shared reader."""
        return self._snapshot.get() or self._connected.reader

    @property
    def _connected(self) -> _Connections:
        """The connections; RecorderClosed before open() and after close()."""
        if self._connections is None:
            raise RecorderClosed(f"the SQLite ledger {self.path} is not open")
        return self._connections

    async def open(self, migrate: bool = True) -> None:
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            self._connections = await self._connect_both(migrate)
        except BaseException:
            await self.close()  # a failed open keeps no write-lock thread (nor a scratch store's file)
            raise

    async def _connect_both(self, migrate: bool) -> _Connections:
        writer = await self._open_writer(migrate)
        if self.path == ":memory:":
            return _Connections(writer, writer)
        try:
            return _Connections(writer, await self._connect())
        except BaseException:
            await writer.close()  # its thread would outlive us
            raise

    async def _open_writer(self, migrate: bool) -> aiosqlite.Connection:
        """The writer connection, the schema checked (or brought up to date, with `migrate`)."""
        # One process at a time connects and creates, converts or upgrades the file (workers
        # start together): SQLite refuses a journal-mode change racing another, without waiting.
        # Waiting for the lock is translated too: a timeout there is the ledger being unavailable.
        with unavailable_on(is_outage, DRIVER_ERRORS):
            async with self._exclusive(MIGRATE_TIMEOUT_S):
                writer = await self._connect()
                try:
                    await sqlite_schema.prepare(writer, migrate)
                except BaseException:
                    await writer.close()  # a failed open keeps no connection: its thread would outlive us
                    raise
        return writer

    @translating
    async def _connect(self) -> aiosqlite.Connection:
        db = await aiosqlite.connect(self.path, isolation_level=None)
        try:
            await db.execute(f"PRAGMA busy_timeout = {int(self._timeout_s * 1000)}")
            await db.execute("PRAGMA journal_mode = WAL")
            await db.execute("PRAGMA synchronous = FULL")  # a 200 means the charge is on disk
        except BaseException:
            await db.close()  # (for instance not a database): its thread would outlive us
            raise
        return db

    async def close(self) -> None:
        connections, self._connections = self._connections, None
        if connections is not None:
            await connections.reader.close()
            if connections.writer is not connections.reader:
                await connections.writer.close()
        if self._file_lock:
            self._file_lock.close()

    @contextlib.asynccontextmanager
    async def _exclusive(self, timeout_s: float | None = None) -> AsyncIterator[None]:
        """This recorder's turn to write, and then this process's (in that order: a process
        queues in the kernel once, not once per waiting task); the wait for another process is
        bounded by `timeout_s` (the recorder's timeout unless given)."""
        async with self._write_lock:
            if self._file_lock is None:
                yield
                return
            async with self._file_lock.held(self._timeout_s if timeout_s is None else timeout_s):
                yield

    @translating
    async def append(self, units: Sequence[Append]) -> list[Outcome]:
        # OverflowError: a value beyond SQLite's 64-bit INTEGER.
        return await isolating_rejections(units, self._locked_append, (sqlite3.IntegrityError, OverflowError))

    @reporting_outages(is_outage)
    async def _locked_append(self, units: Sequence[Append]) -> list[Outcome]:
        async with self._exclusive():
            return await self._append_in_transaction(units)

    async def _append_in_transaction(self, units: Sequence[Append]) -> list[Outcome]:
        # One call on the connection's thread for the whole transaction (aiosqlite's
        # Connection._execute submits a plain function): one hop there and one back per batch.
        writer = self._connected.writer
        transaction = asyncio.ensure_future(writer._execute(sqlite_writes.append, writer._conn, units, self.clock()))
        try:
            return await asyncio.shield(transaction)
        except asyncio.CancelledError:
            # The thread finishes it (commit or rollback) whatever we do: the write locks are let
            # go only after that, so no other writer ever meets SQLite's own lock still held.
            await asyncio.wait([transaction])
            raise

    @translating
    async def read(self, after: int = 0, limit: int = 1000) -> list[Recorded]:
        rows = await self._reader.execute_fetchall(
            f"{SELECT_EVENTS} WHERE position > ? ORDER BY position LIMIT ?", (after, limit))
        return [_row_to_recorded(row) for row in rows]

    @translating
    async def read_stream(self, stream_id: str) -> list[Recorded]:
        rows = await self._reader.execute_fetchall(
            f"{SELECT_EVENTS} WHERE stream_id = ? ORDER BY version", (stream_id,))
        return [_row_to_recorded(row) for row in rows]

    @translating
    async def read_streams(self, after: int, span: int, low: str, high: str | None) -> list[Recorded]:
        sql, params = streams_after(SELECT_EVENTS, after, span, low, high)
        rows = await self._reader.execute_fetchall(sql, params)
        return [_row_to_recorded(row) for row in rows]

    def exclusive(self) -> "contextlib.AbstractAsyncContextManager[None]":
        return self._exclusive()

    @translating
    async def absorb(self, others: Sequence[Recorder], tables: Sequence[str]) -> None:
        for other in others:
            async with self._attached(cast(SQLiteRecorder, other).path) as name:
                db = self._connected.writer
                await db._execute(sqlite_writes.copy_rows, db._conn, name, tables)

    @translating
    async def swap_in(self, rebuilt: Recorder, tables: Sequence[str], catch_up: Callable[[], Awaitable[int]]
                      ) -> int:
        # SQLite has one writer, so the tables are patched a range of keys at a time, each under
        # the write lock for a moment, from a rebuilt store brought up to date each time: a range
        # once patched stays right, as the appends after it change it as they change any row.
        end = 0
        async with self._attached(cast(SQLiteRecorder, rebuilt).path) as name:
            db = self._connected.writer
            for table in tables:
                ranges = await db._execute(sqlite_writes.key_ranges, db._conn, name, table, PATCHED_ROWS)
                for low, high in ranges:
                    async with self._exclusive():
                        end = await catch_up()
                        await db._execute(sqlite_writes.patch, db._conn, name, table, low, high)
        return end

    @contextlib.asynccontextmanager
    async def _attached(self, path: str) -> AsyncIterator[str]:
        """Another database file attached to the writer connection, under the name yielded."""
        db = self._connected.writer
        await db.execute("ATTACH DATABASE ? AS other", (path,))  # refused inside a transaction: none is open
        try:
            yield "other"
        finally:
            await db.execute("DETACH DATABASE other")

    @translating
    async def _fetch(self, sql: str, params: Sequence = ()) -> list[tuple]:
        rows = await self._reader.execute_fetchall(sql, tuple(params))
        return cast(list[tuple], list(rows))  # typed as sqlite3.Row; with no row_factory set, tuples

    @translating
    async def remove_text(self, before_us: int, now_us: int, limit: int = 1000) -> int:
        async with self._exclusive():
            cursor = await self._connected.writer.execute(REMOVE_TEXT, (now_us, before_us, limit))
            return cursor.rowcount

    @translating
    async def put_tiles(self, from_size: int, to_size: int, tiles: Mapping[tuple[int, int], bytes]) -> bool:
        async with self._exclusive():  # the one writer of the file: no other grower can interleave
            db = self._connected.writer
            await db.execute("BEGIN IMMEDIATE")
            try:
                rows = list(await db.execute_fetchall("SELECT size FROM merkle_tree WHERE name = 'log'"))
                if (rows[0][0] if rows else 0) != from_size:
                    await db.rollback()
                    return False
                await db.executemany(PUT_TILE, [(level, index, hashes) for (level, index), hashes in tiles.items()])
                await db.execute(PUT_TREE_SIZE, (to_size,))
                await db.commit()
            except BaseException:
                await db.rollback()
                raise
        return True

    @translating
    async def remove_text_of(self, content_prefix: str, now_us: int) -> int:
        async with self._exclusive():
            cursor = await self._connected.writer.execute(REMOVE_TEXT_OF, (now_us, *prefix_range(content_prefix)))
            return cursor.rowcount

    @translating
    async def rebuild(self, events: AsyncIterable[list[Recorded]]) -> None:
        async with self._exclusive():
            db = self._connected.writer
            await db.execute("BEGIN IMMEDIATE")
            try:
                await _apply_overlapped(db, events)
                await db.commit()
            except BaseException:
                await db.rollback()
                raise

    @contextlib.asynccontextmanager
    async def snapshot(self) -> AsyncIterator[None]:
        # A read transaction on a connection of its own pins one WAL snapshot for this task's reads.
        if self.path == ":memory:":  # one connection is the whole database: nothing else to pin it on
            yield
            return
        reader = await self._connect()
        try:
            with unavailable_on(is_outage):
                await reader.execute("BEGIN")
                await reader.execute("SELECT 1 FROM ledger_schema LIMIT 1")  # BEGIN alone pins nothing yet
            token = self._snapshot.set(reader)
            try:
                yield
            finally:
                self._snapshot.reset(token)
        finally:
            await reader.close()

    async def take_turn(self, job: str) -> Turn | None:
        return turns.OwnTurn() if self.path == ":memory:" else turns.FileTurn.take(f"{self.path}-{job}.turn")

    def opener(self) -> Callable[[str], Recorder]:
        return SQLiteRecorder.from_url

    def scratch(self) -> "SQLiteRecorder":
        directory = None if self.path == ":memory:" else str(Path(self.path).parent)
        fd, path = tempfile.mkstemp(prefix="replay-", suffix=".db", dir=directory)
        os.close(fd)  # the file only reserves the name; the scratch recorder opens it itself
        return _ScratchSQLiteRecorder(path)


async def _apply_overlapped(db: aiosqlite.Connection, events: AsyncIterable[list[Recorded]]) -> None:
    """Each batch's runs written on the connection's thread (one hop per batch) while the next
    batch is read and folded here: SQLite lets go of the GIL while it works, so the two overlap."""
    folder = batches.Folder(deferring=True)
    writing: asyncio.Future | None = None
    try:
        async for batch in events:
            runs = folder.runs(batch)
            if writing is not None:
                await writing
            writing = asyncio.ensure_future(db._execute(sqlite_writes.apply, db._conn, runs))
        if writing is not None:
            await writing
        await db._execute(sqlite_writes.apply, db._conn, folder.flush())
    finally:
        if writing is not None and not writing.done():
            await asyncio.wait([writing])  # the thread finishes it whatever happens: never roll back under it


# A scratch store's page cache: the rebuild inserts into its indexes all over (request ids are
# random), and SQLite's default 2 MB cache makes each such insert a read from the file.
SCRATCH_CACHE_KB = 128 * 1024


class _ScratchSQLiteRecorder(SQLiteRecorder):
    """A throwaway store for verification and replay; its file is removed when the recorder that
    made it (its owner) is closed. A worker process joins it by URL (`opener`), never owning it."""

    def __init__(self, path: str, *, owner: bool = True) -> None:
        super().__init__(path)
        self.owner = owner
        self._file_lock = None  # one process writes it at a time: the owner's, or one worker

    @classmethod
    def joined(cls, url: str) -> "SQLiteRecorder":
        return cls(path_of(url), owner=False)

    def opener(self) -> Callable[[str], Recorder]:
        return _ScratchSQLiteRecorder.joined

    async def _connect(self) -> aiosqlite.Connection:
        db = await aiosqlite.connect(self.path, isolation_level=None)
        await db.execute(f"PRAGMA busy_timeout = {int(self._timeout_s * 1000)}")
        # Scratch data: durability is pointless, and a rebuild is one transaction into a new file,
        # which a write-ahead log would only make SQLite write twice.
        await db.execute("PRAGMA journal_mode = MEMORY")
        await db.execute("PRAGMA synchronous = OFF")
        await db.execute(f"PRAGMA cache_size = -{SCRATCH_CACHE_KB}")
        return db

    async def open(self, migrate: bool = True) -> None:
        await super().open(migrate)
        if self.owner:
            await self._connected.writer.executescript(schema.drop_indexes())  # no query here needs them

    async def close(self) -> None:
        await super().close()
        if self.owner:
            await asyncio.to_thread(Path(self.path).unlink, missing_ok=True)
