"""The SQLite recorder: the shared contract, plus what only SQLite has (pragmas, files, URLs)."""

import asyncio
import fcntl
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from ledger import audit
from ledger.recorder import DatabaseError
from ledger.backends import sqlite as sqlite_module
from ledger.backends.sqlite import SQLiteRecorder, path_of
from ledger.backends.timeouts import STATEMENT_TIMEOUT_S
from ledger.writer import GroupCommitWriter
from tests.ledger.ledger_helpers import (
    POPULATED, append_ok, content, credits, hold, org, populate, projection_tables, request, run_sql, unit,
)
from tests.ledger.recorder_contract import RecorderContract
from tests.ledger.audit_contract import MANY, populate_many


class TestSQLiteRecorder(RecorderContract):
    refusal = sqlite3.IntegrityError

    def make_recorder(self, tmp_path: Path) -> SQLiteRecorder:
        return SQLiteRecorder(str(tmp_path / "ledger.db"))

    async def execute_raw(self, tmp_path: Path, sql: str, params: Sequence = ()) -> None:
        await asyncio.to_thread(run_sql, tmp_path / "ledger.db", (sql, params))

    def drop_immutability(self) -> Sequence[str]:
        return ["DROP TRIGGER events_are_immutable", "DROP TRIGGER events_are_permanent"]


async def pragma(db, name: str):
    [(value,)] = await db.execute_fetchall(f"PRAGMA {name}")
    return value


async def test_writer_connection_is_wal_with_synchronous_full(sqlite_recorder):
    writer = sqlite_recorder._connected.writer
    assert await pragma(writer, "journal_mode") == "wal"
    assert await pragma(writer, "synchronous") == 2  # FULL
    assert await pragma(writer, "busy_timeout") == STATEMENT_TIMEOUT_S * 1000  # bounded: then LedgerUnavailable


async def test_reader_connection_is_a_second_wal_connection(sqlite_recorder):
    reader = sqlite_recorder._connected.reader
    assert reader is not sqlite_recorder._connected.writer
    assert await pragma(reader, "journal_mode") == "wal"


async def test_open_creates_missing_parent_directories(tmp_path):
    recorder = SQLiteRecorder(str(tmp_path / "a" / "b" / "ledger.db"))
    await recorder.open()
    try:
        [[created]] = await append_ok(recorder, unit("acme", org()))
        assert created.position == 1
    finally:
        await recorder.close()
    assert (tmp_path / "a" / "b" / "ledger.db").is_file()


async def test_two_recorders_on_one_file_appending_concurrently_keep_the_log_gapless(tmp_path):
    path = str(tmp_path / "ledger.db")
    first, second = SQLiteRecorder(path), SQLiteRecorder(path)
    await first.open()
    await second.open()
    orgs = ["acme", "beta", "gamma"]
    try:
        await append_ok(first, *[unit(o, org(o)) for o in orgs])
        writers = [GroupCommitWriter(first), GroupCommitWriter(second)]
        for writer in writers:
            writer.start()
        try:
            results = await asyncio.gather(*(
                writers[i % 2].append(unit(orgs[i % 3], request(f"r{i}", charged=1))) for i in range(300)))
        finally:
            for writer in writers:
                await writer.close()
        events = await first.read()
        assert events == await second.read()
        assert [r.position for r in events] == list(range(1, 304))
        assert sorted(r.position for [r] in results) == list(range(4, 304))
        for o in orgs:
            assert [r.version for r in await second.read_stream(o)] == list(range(1, 102))
        assert await first._fetch("SELECT org_id, spent_inr_nano, requests FROM orgs ORDER BY org_id") == [
            (o, 100, 100) for o in orgs]
        assert await audit.verify(first) == (303, [])
        assert await audit.verify(second) == (303, [])
    finally:
        await first.close()
        await second.close()


async def test_verify_deletes_its_scratch_file(sqlite_recorder, tmp_path):
    await populate(sqlite_recorder)
    files = sorted(p.name for p in tmp_path.iterdir())
    assert await audit.verify(sqlite_recorder) == (POPULATED, [])
    assert sorted(p.name for p in tmp_path.iterdir()) == files
    assert not list(tmp_path.glob("replay-*"))


async def test_verify_that_finds_a_difference_still_deletes_its_scratch_file(sqlite_recorder, tmp_path, tamper):
    await populate(sqlite_recorder)
    await tamper("UPDATE orgs SET requests = 99")
    files = sorted(p.name for p in tmp_path.iterdir())
    checked, problems = await audit.verify(sqlite_recorder)
    assert (checked, len(problems)) == (POPULATED, 1)
    assert sorted(p.name for p in tmp_path.iterdir()) == files


async def test_scratch_lives_beside_the_ledger_and_its_file_goes_on_close(sqlite_recorder, tmp_path):
    scratch = sqlite_recorder.scratch()
    assert Path(scratch.path).parent == tmp_path
    assert Path(scratch.path).name.startswith("replay-")
    await scratch.open()
    await scratch.close()
    assert not Path(scratch.path).exists()


def test_path_of_reads_relative_and_absolute_sqlite_urls():
    assert path_of("sqlite:///data/ledger.db") == "data/ledger.db"
    assert path_of("sqlite:////var/lib/ledger.db") == "/var/lib/ledger.db"
    assert path_of("sqlite:///") == ":memory:"
    assert SQLiteRecorder.from_url("sqlite:///x.db").path == "x.db"


@pytest.mark.parametrize("url", ["postgresql://localhost/ledger", "sqlite://x.db", "/tmp/x.db"])
def test_path_of_refuses_other_urls(url):
    with pytest.raises(ValueError, match="not a sqlite URL"):
        path_of(url)


async def test_opening_a_ledger_whose_content_has_no_times_backfills_them(ledger_path):
    old = SQLiteRecorder(str(ledger_path))
    await old.open()
    await append_ok(old, unit("acme", org(), request("r1", content_id="c1"), contents=[content("c1", b"hi")]))
    await old.close()
    # The content table as the first release made it (no created_at_us column, no schema versions).
    run_sql(ledger_path, "CREATE TABLE content_old AS SELECT content_id, stream_id, sha256, body,"
            " removed_at_us FROM content", "DROP TABLE content", "ALTER TABLE content_old RENAME TO content",
            "DROP TABLE ledger_schema")
    upgraded = SQLiteRecorder(str(ledger_path))
    await upgraded.open()
    try:
        [(logged,)] = await upgraded._fetch("SELECT created_at_us FROM request_log")
        assert await upgraded._fetch("SELECT content_id, created_at_us FROM content") == [("c1", logged)]
        assert (await audit.verify(upgraded))[1] == []
    finally:
        await upgraded.close()


async def test_an_append_batch_is_one_call_on_the_database_thread(sqlite_recorder, caplog):
    # aiosqlite's thread logs each call it runs: a batch (holds, content, projections, commit)
    # must be one of them, however many statements it takes.
    await append_ok(sqlite_recorder, unit("acme", org(), credits(10**9)))
    batch = [unit("acme", hold(f"h{n}", 10), request(f"r{n}", charged=1, content_id=f"c{n}"),
                  contents=[content(f"c{n}", b"text")]) for n in range(20)]
    with caplog.at_level(logging.DEBUG, logger="aiosqlite"):
        outcomes = await append_ok(sqlite_recorder, *batch)
    calls = [r for r in caplog.records if r.name == "aiosqlite" and r.getMessage().startswith("executing")]
    assert len(calls) == 1
    assert [r.position for rs in outcomes for r in rs] == list(range(3, 43))
    assert await sqlite_recorder._fetch("SELECT held_inr_nano, requests FROM orgs") == [(200, 20)]


async def test_a_cancelled_append_keeps_the_write_lock_until_its_transaction_has_ended(sqlite_recorder, ledger_path):
    await append_ok(sqlite_recorder, unit("acme", org()))
    busy = asyncio.ensure_future(sqlite_recorder._connected.writer._execute(time.sleep, 0.3))  # the thread is busy
    appending = asyncio.ensure_future(sqlite_recorder.append([unit("acme", request("r1"))]))
    await asyncio.sleep(0.05)
    appending.cancel()
    await asyncio.sleep(0.05)
    assert not appending.done() and not lock_is_free(ledger_path)  # its transaction has yet to run
    with pytest.raises(asyncio.CancelledError):
        await appending
    await busy
    assert lock_is_free(ledger_path) and not sqlite_recorder._connected.writer._conn.in_transaction
    assert len(await sqlite_recorder.read()) == 2  # the thread ran it to its end: here a commit


def lock_is_free(ledger_path: Path) -> bool:
    fd = os.open(f"{ledger_path}-lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


async def test_a_failed_open_leaves_no_connection_thread_behind(tmp_path):
    """aiosqlite runs each connection in a thread; one left open by a failed open would keep the
    process from exiting."""
    path = tmp_path / "not-a-ledger.db"
    path.write_bytes(b"this is not a SQLite database" * 100)
    before = {t.ident for t in threading.enumerate()}
    with pytest.raises(DatabaseError, match="file is not a database"):
        await SQLiteRecorder(str(path)).open()
    await asyncio.sleep(0.1)  # a closed connection's thread ends on its own
    assert {t.ident for t in threading.enumerate() if t.is_alive()} <= before


async def test_a_replay_patches_a_range_of_keys_at_a_time_and_appends_go_on_between(sqlite_recorder, tmp_path,
                                                                                    monkeypatch):
    """With ranges of two rows, every table is patched in many steps, each under the write lock
    for a moment: a deleted, a changed and a forged row are all repaired, and appends made
    meanwhile land in the repaired tables."""
    monkeypatch.setattr(sqlite_module, "PATCHED_ROWS", 2)
    await populate_many(sqlite_recorder)
    before = await projection_tables(sqlite_recorder)
    run_sql(tmp_path / "ledger.db", "DELETE FROM holds WHERE hold_id = 'org2-g'",
            "UPDATE orgs SET spent_inr_nano = 0 WHERE org_id = 'org5'",
            "INSERT INTO provider_keys (org_id, provider, fingerprint, set_at_us) VALUES ('org1', 'x', 'y', 0)")

    async def spend(n: int) -> None:
        await append_ok(sqlite_recorder, unit("org3", request(f"during-{n}", charged=1, key_id="org3-k")))

    replayed, *_ = await asyncio.gather(audit.replay(sqlite_recorder), *(spend(n) for n in range(20)))
    after = await projection_tables(sqlite_recorder)
    assert replayed == MANY + 20 and after["holds"] == before["holds"] and after["provider_keys"] == []
    assert [row[5] for row in after["orgs"] if row[0] == "org5"] == [47]
    assert await audit.verify(sqlite_recorder) == (MANY + 20, [])
