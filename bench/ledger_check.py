"""After a configuration's runs: does the ledger hold what the load was answered?

Each request answered 200 must have left one `request_completed` event. wrk and the other load
generators stop with requests still in flight; those may be charged without being counted as
answered, so the events may exceed the 200s by at most the concurrency of the runs.
"""

import asyncio
import contextlib
import socket
import sqlite3
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

from bench import procs

POSTGRES_DSN = "postgresql://postgres@127.0.0.1:5432/test"  # trust auth, as in tests/support.py
COMPLETED = "SELECT COUNT(*) FROM events WHERE type = 'request_completed'"


def postgres_reachable(dsn: str = POSTGRES_DSN) -> bool:
    """Whether something answers on the DSN's host and port (within a second)."""
    where = urlsplit(dsn)
    with contextlib.suppress(OSError), socket.create_connection((where.hostname or "127.0.0.1",
                                                                 where.port or 5432), timeout=1):
        return True
    return False


@contextlib.contextmanager
def postgres_ledger() -> Iterator[str]:
    """The URL of a ledger in a schema of its own, dropped afterwards."""
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    try:
        yield f"{POSTGRES_DSN}?schema={schema}"
    finally:
        asyncio.run(drop_schema(schema))


async def drop_schema(schema: str, dsn: str = POSTGRES_DSN) -> None:
    """Drop a throwaway schema and everything in it."""
    import asyncpg
    db = await asyncpg.connect(dsn)
    try:
        await db.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    finally:
        await db.close()


async def _postgres(statement: str, schema: str) -> int:
    import asyncpg
    db = await asyncpg.connect(POSTGRES_DSN, server_settings={"search_path": schema})
    try:
        return await db.fetchval(statement)
    finally:
        await db.close()


def completed_events(ledger_url: str) -> int:
    """How many `request_completed` events the ledger holds."""
    if ledger_url.startswith("sqlite:///"):
        with contextlib.closing(sqlite3.connect(ledger_url.removeprefix("sqlite:///"))) as db:
            return db.execute(COMPLETED).fetchone()[0]
    return asyncio.run(_postgres(COMPLETED, ledger_url.rsplit("schema=", 1)[1]))


def verify(config: Path) -> tuple[bool, str]:
    """`gateway ledger verify` on the configuration's ledger: (passed, its last line of output)."""
    done = subprocess.run([procs.GATEWAY, "ledger", "verify", "--config", str(config)], cwd=procs.ROOT,
                          env=procs.clean_env(), capture_output=True, text=True)
    lines = (done.stdout.strip() or done.stderr.strip() or "-").splitlines()
    return done.returncode == 0, lines[-1][:200]


def check(ledger_url: str, config: Path, answered_ok: int, in_flight: int) -> dict:
    """The sanity check of one configuration's ledger, with the gateway stopped."""
    events = completed_events(ledger_url)
    passed, message = verify(config)
    return {"request_completed": events, "answered_200": answered_ok, "verify_passed": passed,
            "verify_output": message, "counts_match": 0 <= events - answered_ok <= in_flight}
