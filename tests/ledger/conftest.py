"""Fixtures for the ledger tests: SQLite recorders on files in tmp_path, and a tamper tool."""

import asyncio
from pathlib import Path

import pytest

from ledger.backends.sqlite import SQLiteRecorder
from tests.ledger.ledger_helpers import run_sql


@pytest.fixture
def ledger_path(tmp_path: Path) -> Path:
    return tmp_path / "ledger.db"


@pytest.fixture
async def sqlite_recorder(ledger_path: Path):
    recorder = SQLiteRecorder(str(ledger_path))
    await recorder.open()
    yield recorder
    await recorder.close()


@pytest.fixture
async def other_sqlite_recorder(ledger_path: Path, sqlite_recorder: SQLiteRecorder):
    """A second recorder on the same file: what another process would see."""
    recorder = SQLiteRecorder(str(ledger_path))
    await recorder.open()
    yield recorder
    await recorder.close()


@pytest.fixture
def tamper(ledger_path: Path):
    """Run raw SQL against the ledger file, as someone with file access could."""
    async def run(*statements: tuple[str, tuple] | str) -> None:
        await asyncio.to_thread(run_sql, ledger_path, *statements)
    return run
