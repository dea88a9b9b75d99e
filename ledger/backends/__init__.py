"""Choosing a recorder from a ledger URL."""

from ledger.recorder import Clock, Recorder, wall_clock_us
from ledger.backends.sqlite import SQLiteRecorder
from ledger.backends.timeouts import CONNECT_TIMEOUT_S, STATEMENT_TIMEOUT_S


def recorder_for(url: str, *, timeout_s: float = STATEMENT_TIMEOUT_S,
                 connect_timeout_s: float = CONNECT_TIMEOUT_S, clock: Clock = wall_clock_us) -> Recorder:
    """The recorder for `sqlite:///path` or `postgresql://user@host:port/db[?schema=name]`; past
    the timeouts (see ledger.backends.timeouts) it raises LedgerUnavailable."""
    if url.startswith("sqlite:"):
        return SQLiteRecorder.from_url(url, timeout_s=timeout_s, clock=clock)
    if url.startswith(("postgresql:", "postgres:")):
        from ledger.backends.postgres import PostgresRecorder  # asyncpg is loaded only when used

        return PostgresRecorder.from_url(url, timeout_s=timeout_s, connect_timeout_s=connect_timeout_s, clock=clock)
    raise ValueError(f"unsupported ledger URL {url!r}: expected sqlite:///path or postgresql://...")
