"""Each backend's turns (ledger.turns.Turn): the database (or the kernel, for a SQLite file) ends
the turn of a process that dies, even by SIGKILL, so another takes the job over at once, with no
lease to wait out.
"""

import fcntl
import os

import asyncpg

from ledger.turns import Turn

CHECK_TIMEOUT_S = 5.0


class FileTurn(Turn):
    """An exclusive flock on a file beside the SQLite database, held while its descriptor is open."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    @classmethod
    def take(cls, path: str) -> "FileTurn | None":
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        return cls(fd)

    async def held(self) -> bool:
        return self._fd >= 0  # the kernel keeps a flock for as long as the descriptor is open

    async def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
        self._fd = -1


class OwnTurn(Turn):
    """A database only this process can open (SQLite in memory): the turn is always its own."""

    async def held(self) -> bool:
        return True

    async def release(self) -> None:
        return None


class AdvisoryTurn(Turn):
    """A PostgreSQL session advisory lock on a connection of its own, which PostgreSQL releases when
    the connection ends: at release, or when the process dies and its socket closes."""

    def __init__(self, db: asyncpg.Connection) -> None:
        self._db: asyncpg.Connection | None = db

    @classmethod
    async def take(cls, dsn: str, key: str, timeout_s: float) -> "AdvisoryTurn | None":
        db = await asyncpg.connect(dsn, timeout=timeout_s)
        try:
            # Locks are per database, not per schema: the key names the schema too.
            won = await db.fetchval("SELECT pg_try_advisory_lock(hashtextextended($1, 0))", key, timeout=timeout_s)
        except BaseException:
            await db.close()
            raise
        if not won:
            await db.close()
            return None
        return cls(db)

    async def held(self) -> bool:
        """Whether the connection, and so the lock, still stands: a lost one may already be another's."""
        if self._db is None or self._db.is_closed():
            return False
        try:
            await self._db.fetchval("SELECT 1", timeout=CHECK_TIMEOUT_S)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError):
            await self.release()
            return False
        return True

    async def release(self) -> None:
        db, self._db = self._db, None
        if db is not None and not db.is_closed():
            db.terminate()  # ends the session, and with it the lock, without waiting on the server
