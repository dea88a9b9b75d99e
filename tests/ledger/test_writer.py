"""Group commit: each caller hears its own unit's outcome; batches form while a commit runs."""

import asyncio

import msgspec
import pytest

from ledger.recorder import AppendRejected, ConcurrencyError, LedgerUnavailable
from ledger.backends.sqlite import SQLiteRecorder
from ledger.writer import GroupCommitWriter, Withdrawn, WriterClosed
from tests.support import poll
from tests.ledger.ledger_helpers import append_ok, credits, org, request, unit


class GatedRecorder(SQLiteRecorder):
    """A real SQLite recorder whose commits wait for `gate`: a slow database, on demand."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.gate = asyncio.Event()
        self.gate.set()
        self.waiting = asyncio.Event()  # set when an append is held at the gate
        self.batches: list[int] = []

    async def append(self, units):
        if not self.gate.is_set():
            self.batches.append(len(units))
            self.waiting.set()
            await self.gate.wait()
        return await super().append(units)


class FailingRecorder(SQLiteRecorder):
    """Fails the next `failures` calls to append, as a database that is down would."""

    failures = 0

    async def append(self, units):
        if self.failures:
            self.failures -= 1
            raise OSError("disk I/O error")
        return await super().append(units)


@pytest.fixture
async def gated(ledger_path):
    recorder = GatedRecorder(str(ledger_path))
    await recorder.open()
    await append_ok(recorder, unit("acme", org("Acme")), unit("beta", org("Beta")))
    yield recorder
    await recorder.close()


@pytest.fixture
async def writer(gated):
    writer = GroupCommitWriter(gated)
    writer.start()
    yield writer
    gated.gate.set()
    await writer.close()


async def hold(recorder: GatedRecorder, writer: GroupCommitWriter, first) -> asyncio.Task:
    """Close the gate and start `first`, so that it is in flight and later appends queue."""
    recorder.gate.clear()
    task = asyncio.create_task(writer.append(first))
    await asyncio.wait_for(recorder.waiting.wait(), 5)
    return task


async def test_each_caller_receives_its_own_units_events(writer):
    a, b, c = await asyncio.gather(writer.append(unit("acme", credits(1))),
                                   writer.append(unit("beta", credits(2), credits(3))),
                                   writer.append(unit("acme", credits(4))))
    assert [(r.stream_id, r.version, r.event) for r in a] == [("acme", 2, credits(1))]
    assert [(r.stream_id, r.version, r.event) for r in b] == [("beta", 2, credits(2)), ("beta", 3, credits(3))]
    assert [(r.stream_id, r.version, r.event) for r in c] == [("acme", 3, credits(4))]
    assert sorted(r.position for r in a + b + c) == [3, 4, 5, 6]


async def test_appends_queued_behind_a_commit_share_the_next_batch(gated, writer):
    first = await hold(gated, writer, unit("acme", credits(1)))
    queued = [asyncio.create_task(writer.append(unit("beta", credits(n)))) for n in range(2, 6)]
    await asyncio.sleep(0)
    gated.gate.set()
    await asyncio.gather(first, *queued)
    assert gated.batches == [1]  # only the first waited at the gate
    assert (writer.batches, writer.largest_batch) == (2, 4)


async def test_max_batch_caps_the_units_per_commit(gated):
    writer = GroupCommitWriter(gated, max_batch=2)
    writer.start()
    try:
        first = await hold(gated, writer, unit("acme", credits(1)))
        queued = [asyncio.create_task(writer.append(unit("beta", credits(n)))) for n in range(1, 6)]
        await asyncio.sleep(0)
        gated.gate.set()
        await asyncio.gather(first, *queued)
    finally:
        await writer.close()
    assert (writer.batches, writer.largest_batch) == (4, 2)


async def test_a_concurrency_error_goes_to_its_caller_only(gated, writer):
    first = await hold(gated, writer, unit("acme", credits(1)))
    ok = asyncio.create_task(writer.append(unit("beta", credits(2))))
    stale = asyncio.create_task(writer.append(unit("acme", credits(3), expected_version=1)))
    also_ok = asyncio.create_task(writer.append(unit("acme", credits(4), expected_version=2)))
    await asyncio.sleep(0)
    gated.gate.set()
    await first
    with pytest.raises(ConcurrencyError):
        await stale
    assert [(r.stream_id, r.version) for r in await ok] == [("beta", 2)]
    assert [(r.stream_id, r.version) for r in await also_ok] == [("acme", 3)]
    assert writer.largest_batch == 3
    assert [r.event for r in await gated.read_stream("acme")] == [org("Acme"), credits(1), credits(4)]


async def test_a_rejected_unit_goes_to_its_caller_only(gated, writer):
    first = await hold(gated, writer, unit("acme", request("r1", charged=5)))
    again = asyncio.create_task(writer.append(unit("beta", request("r1", charged=6))))
    other = asyncio.create_task(writer.append(unit("beta", request("r2", charged=7))))
    await asyncio.sleep(0)
    gated.gate.set()
    await first
    with pytest.raises(AppendRejected):
        await again
    assert [r.event for r in await other] == [request("r2", charged=7)]
    assert await gated._fetch("SELECT request_id, org_id FROM request_log ORDER BY request_id") == [
        ("r1", "acme"), ("r2", "beta")]


async def test_a_database_failure_reaches_every_caller_of_the_batch_and_the_writer_goes_on(ledger_path):
    recorder = FailingRecorder(str(ledger_path))
    await recorder.open()
    writer = GroupCommitWriter(recorder)
    writer.start()
    try:
        await append_ok(recorder, unit("acme", org()))
        recorder.failures = 1
        outcomes = await asyncio.gather(writer.append(unit("acme", credits(1))),
                                        writer.append(unit("acme", credits(2))), return_exceptions=True)
        assert [type(o) for o in outcomes] == [OSError, OSError]
        [added] = await writer.append(unit("acme", credits(3)))
        assert (added.position, added.version) == (2, 2)
    finally:
        await writer.close()
        await recorder.close()


async def test_backlog_is_empty_when_idle(writer):
    assert writer.backlog() == (0, 0.0)
    await writer.append(unit("acme", credits(1)))
    assert writer.backlog() == (0, 0.0)


async def test_backlog_reports_pending_count_and_age_while_a_commit_is_slow(gated, writer):
    first = await hold(gated, writer, unit("acme", credits(1)))
    await asyncio.sleep(0.05)
    queued = [asyncio.create_task(writer.append(unit("beta", credits(n)))) for n in range(1, 3)]
    await asyncio.sleep(0)
    count, age = writer.backlog()
    assert count == 3
    assert 0.04 <= age < 5  # queued before a 0.05 s sleep (asyncio may wake a tick early)
    gated.gate.set()
    await asyncio.gather(first, *queued)
    assert writer.backlog() == (0, 0.0)


async def test_close_commits_everything_taken_then_refuses_appends(gated, writer):
    first = await hold(gated, writer, unit("acme", credits(1)))
    queued = [asyncio.create_task(writer.append(unit("beta", credits(n)))) for n in range(2, 4)]
    await asyncio.sleep(0)
    closing = asyncio.create_task(writer.close())
    await asyncio.sleep(0)
    with pytest.raises(WriterClosed):
        await writer.append(unit("acme", credits(99)))
    gated.gate.set()
    await closing
    assert [r.version for r in await first] == [2]
    assert [[r.version for r in await task] for task in queued] == [[2], [3]]
    assert [r.event for r in await gated.read()][2:] == [credits(1), credits(2), credits(3)]
    with pytest.raises(WriterClosed):
        await writer.append(unit("acme", credits(100)))
    assert len(await gated.read()) == 5


async def test_close_of_an_idle_writer_returns(writer):
    await asyncio.wait_for(writer.close(), 5)
    with pytest.raises(WriterClosed):
        await writer.append(unit("acme", credits(1)))


async def test_on_commit_receives_exactly_the_recorded_events_before_callers_resume(gated):
    seen = []
    writer = GroupCommitWriter(gated, on_commit=lambda recorded: seen.append(list(recorded)))
    writer.start()
    try:
        first = await hold(gated, writer, unit("acme", credits(1)))
        ok = asyncio.create_task(writer.append(unit("beta", credits(2), credits(3))))
        stale = asyncio.create_task(writer.append(unit("acme", credits(4), expected_version=0)))
        await asyncio.sleep(0)
        gated.gate.set()
        first_events = await first
        assert seen == [first_events]  # applied before this caller resumed
        ok_events = await ok
        with pytest.raises(ConcurrencyError):
            await stale
    finally:
        await writer.close()
    assert seen == [first_events, ok_events]
    assert [r for batch in seen for r in batch] == (await gated.read())[2:]


async def test_a_unit_still_queued_past_its_bound_is_withdrawn_and_never_written(gated, writer):
    first = await hold(gated, writer, unit("acme", credits(1)))
    with pytest.raises(Withdrawn):
        await writer.append(unit("acme", credits(2)), within=0.05)
    assert writer.backlog()[0] == 1  # only the unit in the commit is left
    gated.gate.set()
    await first
    [after] = await writer.append(unit("acme", credits(3)))
    amounts = [r.event.amount_inr_nano for r in await gated.read_stream("acme") if hasattr(r.event, "amount_inr_nano")]
    assert amounts == [1, 3] and after.version == 3  # the withdrawn unit left no trace


async def test_a_unit_already_in_a_commit_is_waited_for_past_its_bound(gated, writer):
    gated.gate.clear()
    task = asyncio.create_task(writer.append(unit("acme", credits(1)), within=0.05))
    await asyncio.wait_for(gated.waiting.wait(), 5)
    await asyncio.sleep(0.1)  # past the bound, while the commit holds it
    gated.gate.set()
    [recorded] = await task
    assert recorded.version == 2


class AwayRecorder(SQLiteRecorder):
    """A real SQLite recorder whose database is 'away' (appends and reads unavailable) while `away`."""

    away = False

    async def append(self, units):
        if self.away:
            raise LedgerUnavailable("the ledger database is unavailable: gone")
        return await super().append(units)

    async def _fetch(self, sql, params=()):
        if self.away:
            raise LedgerUnavailable("the ledger database is unavailable: gone")
        return await super()._fetch(sql, params)


async def test_the_writer_is_unavailable_after_an_outage_until_a_probe_finds_the_database(ledger_path):
    recorder = AwayRecorder(str(ledger_path))
    await recorder.open()
    writer = GroupCommitWriter(recorder, probe_s=0.05)
    writer.start()
    try:
        await append_ok(recorder, unit("acme", org()))
        assert writer.available
        recorder.away = True
        with pytest.raises(LedgerUnavailable):
            await writer.append(unit("acme", credits(1)))
        await asyncio.sleep(0.2)  # probes fail meanwhile: still away
        assert not writer.available
        recorder.away = False
        assert await poll(lambda: _now(writer.available), timeout=10)  # back with no append to tell it
    finally:
        await writer.close()
        await recorder.close()


async def test_a_refused_unit_does_not_make_the_writer_unavailable(gated, writer):
    with pytest.raises(ConcurrencyError):
        await writer.append(msgspec.structs.replace(unit("acme", credits(1)), expected_version=99))
    assert writer.available


async def _now(value):
    return value
