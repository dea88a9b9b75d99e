"""Choosing a recorder from a ledger URL."""

from ledger.recorder import Recorder
from ledger.sqlite import SQLiteRecorder


def recorder_for(url: str) -> Recorder:
    """The recorder for `sqlite:///path` or `postgresql://user@host:port/db[?schema=name]`."""
    if url.startswith("sqlite:"):
        return SQLiteRecorder.from_url(url)
    if url.startswith(("postgresql:", "postgres:")):
        from ledger.postgres import PostgresRecorder  # asyncpg is loaded only when used

        return PostgresRecorder.from_url(url)
    raise ValueError(f"unsupported ledger URL {url!r}: expected sqlite:///path or postgresql://...")
