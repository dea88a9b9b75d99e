"""Choosing a recorder from a ledger URL."""

from ledger.recorder import Recorder
from ledger.sqlite import SQLiteRecorder


def recorder_for(url: str) -> Recorder:
    """The recorder for `sqlite:///path`; PostgreSQL arrives with its adapter."""
    if url.startswith("sqlite:"):
        return SQLiteRecorder.from_url(url)
    raise ValueError(f"unsupported ledger URL {url!r}: expected sqlite:///path")
