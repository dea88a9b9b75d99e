"""The ledger when its database goes away: every failure is LedgerUnavailable, within a bounded
wait, whatever the driver raised; the group-commit writer and the follower keep running through
the outage and carry on by themselves once the database is back (issue 12).

PostgreSQL is cut through a TCP proxy the test controls (tests/tcp_proxy.py); SQLite is made
unavailable by another connection holding its write lock.
"""

import asyncio
import sqlite3
import time

import pytest

from ledger.follower import LogFollower
from ledger.backends.postgres import PostgresRecorder
from ledger.recorder import AppendRejected, DatabaseError, LedgerUnavailable
from ledger.backends.sqlite import SQLiteRecorder
from ledger.writer import GroupCommitWriter
from tests.ledger.ledger_helpers import append_ok, credits, org, request, unit
from tests.support import POSTGRES_DSN, postgres_url

TIMEOUT_S = 0.5  # the recorders' statement timeout in these tests
BOUND_S = 4 * TIMEOUT_S + 1.0  # query, rollback, release and reconnect, with room for a slow machine


@pytest.fixture
async def proxied(pg_proxy, pg_schema):
    """A PostgreSQL recorder that reaches the database only through the proxy (pg_proxy and
    pg_schema are tests/conftest.py's)."""
    recorder = PostgresRecorder(postgres_url(pg_proxy.port), pg_schema,
                                timeout_s=TIMEOUT_S, connect_timeout_s=TIMEOUT_S)
    await recorder.open()
    yield recorder
    await recorder.close()


@pytest.fixture
async def direct(proxied, pg_schema):
    """A second recorder on the same schema, straight to the database: another process."""
    recorder = PostgresRecorder(POSTGRES_DSN, pg_schema)
    await recorder.open()
    yield recorder
    await recorder.close()


async def unavailable_within(call, bound_s: float = BOUND_S) -> LedgerUnavailable:
    started = time.monotonic()
    with pytest.raises(LedgerUnavailable) as caught:
        await asyncio.wait_for(call, bound_s + 5)  # the hang this test exists to rule out
    assert time.monotonic() - started < bound_s
    return caught.value


@pytest.mark.parametrize("how", ["refused", "blackholed"])
async def test_every_operation_is_ledger_unavailable_in_bounded_time_then_recovers(proxied, pg_proxy, how):
    await append_ok(proxied, unit("acme", org(), credits(10)))
    await pg_proxy.cut(how)
    await unavailable_within(proxied.append([unit("acme", request("r1"))]))
    await unavailable_within(proxied._fetch("SELECT 1"))
    await unavailable_within(proxied.read(0))
    await unavailable_within(proxied.read_stream("acme"))
    await pg_proxy.restore()
    await append_ok(proxied, unit("acme", request("r2")))  # the pool reconnects by itself
    assert [r.event.request_id for r in await proxied.read_stream("acme") if hasattr(r.event, "request_id")
            ] in (["r2"], ["r1", "r2"])  # r1's outcome was unknown to its caller; never twice


async def test_an_outage_is_not_mistaken_for_a_rejected_unit_nor_the_reverse(proxied, pg_proxy):
    await append_ok(proxied, unit("acme", org(), request("r1")))
    outcome, = await proxied.append([unit("acme", request("r1"))])  # the same request id again
    assert isinstance(outcome, AppendRejected)
    pg_proxy.reset()
    await pg_proxy.refuse()
    with pytest.raises(LedgerUnavailable) as caught:
        await proxied.append([unit("acme", request("r2"))])
    assert caught.value.__cause__ is not None  # the driver's own error, kept for the log


async def test_the_writer_fails_every_caller_of_a_failed_batch_and_keeps_running(proxied, pg_proxy):
    writer = GroupCommitWriter(proxied)
    writer.start()
    try:
        await writer.append(unit("acme", org()))
        pg_proxy.blackhole()
        outcomes = await asyncio.gather(*(writer.append(unit("acme", request(f"r{n}"))) for n in range(20)),
                                        return_exceptions=True)
        assert all(isinstance(outcome, LedgerUnavailable) for outcome in outcomes), outcomes
        await pg_proxy.restore()
        recorded = await writer.append(unit("acme", request("after")))
        assert recorded[0].event.request_id == "after"
    finally:
        await writer.close()


async def test_the_follower_survives_an_outage_and_catches_up_after_it(proxied, direct, pg_proxy, caplog):
    applied = []
    follower = LogFollower(proxied, applied.append, interval_s=0.05)
    follower.start()
    try:
        await append_ok(direct, unit("acme", org()))
        await wait_until(lambda: len(applied) == 1)
        pg_proxy.reset()
        await pg_proxy.refuse()
        await append_ok(direct, unit("acme", request("during")))  # another process, still connected
        await wait_until(lambda: follower.unavailable)
        await asyncio.sleep(0.3)  # several polls into the outage
        await pg_proxy.restore()
        await wait_until(lambda: len(applied) == 2 and not follower.unavailable)
    finally:
        await follower.stop()
    assert [r.position for r in applied] == [1, 2]
    outage_lines = [r for r in caplog.records if "unavailable" in r.getMessage()]
    assert len(outage_lines) == 1  # logged when the outage began, not at every poll


async def wait_until(condition, timeout: float = BOUND_S + 3) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition never held"
        await asyncio.sleep(0.02)


# -- SQLite ------------------------------------------------------------------------------------

async def test_sqlite_write_lock_held_too_long_is_ledger_unavailable_then_recovers(tmp_path):
    path = str(tmp_path / "ledger.db")
    recorder = SQLiteRecorder(path, timeout_s=TIMEOUT_S)
    await recorder.open()
    try:
        await append_ok(recorder, unit("acme", org()))
        other = sqlite3.connect(path, isolation_level=None)  # another process, stuck mid-write
        other.execute("BEGIN IMMEDIATE")
        error = await unavailable_within(recorder.append([unit("acme", request("r1"))]), TIMEOUT_S + 1.5)
        assert "locked" in str(error)
        assert await recorder._fetch("SELECT COUNT(*) FROM events") == [(1,)]  # WAL: reads go on
        other.execute("ROLLBACK")
        other.close()
        await append_ok(recorder, unit("acme", request("r2")))
    finally:
        await recorder.close()


async def test_sqlite_statement_errors_are_not_outages(tmp_path):
    recorder = SQLiteRecorder(str(tmp_path / "ledger.db"), timeout_s=TIMEOUT_S)
    await recorder.open()
    try:
        with pytest.raises(DatabaseError, match="no such table") as raised:  # the ledger's type, not sqlite3's
            await recorder._fetch("SELECT * FROM no_such_table")
        assert not isinstance(raised.value, LedgerUnavailable)
    finally:
        await recorder.close()


async def test_a_writer_shutting_down_is_an_unavailable_ledger_to_its_callers(sqlite_recorder):
    writer = GroupCommitWriter(sqlite_recorder)
    writer.start()
    await writer.close()
    with pytest.raises(LedgerUnavailable):  # a client hears 503 with Retry-After, not a 500
        await writer.append(unit("acme", org()))
