"""The follower: every event applied exactly once, whether this process or another wrote it.

`sqlite_recorder` is this process's recorder; `other_sqlite_recorder` is another process
writing to the same file.
"""

import asyncio

import pytest

from ledger.follower import LogFollower
from ledger.writer import GroupCommitWriter
from tests.ledger.ledger_helpers import append_ok, credits, org, unit


class Applied(list):
    """The positions `apply` was called with, in call order."""

    def __call__(self, recorded) -> None:
        self.append(recorded.position)


async def eventually(condition, timeout: float = 30.0) -> None:  # generous: a loaded machine is slow
    async def poll():
        while not condition():
            await asyncio.sleep(0.005)
    await asyncio.wait_for(poll(), timeout)


@pytest.fixture
def applied():
    return Applied()


@pytest.fixture
def follower(sqlite_recorder, applied):
    return LogFollower(sqlite_recorder, applied, interval_s=60)


async def test_catch_up_applies_another_processes_events_in_position_order_once(
        follower, applied, other_sqlite_recorder):
    await append_ok(other_sqlite_recorder, unit("acme", org(), credits(1)), unit("beta", org("Beta")))
    await append_ok(other_sqlite_recorder, unit("acme", credits(2)), unit("beta", credits(3)))
    await follower.catch_up()
    assert (applied, follower.position) == ([1, 2, 3, 4, 5], 5)
    await follower.catch_up()
    assert applied == [1, 2, 3, 4, 5]
    await append_ok(other_sqlite_recorder, unit("acme", credits(4)))
    await follower.catch_up()
    assert (applied, follower.position) == ([1, 2, 3, 4, 5, 6], 6)


async def test_catch_up_reads_past_one_batch_of_1000(follower, applied, other_sqlite_recorder):
    await append_ok(other_sqlite_recorder, unit("acme", org(), *[credits(n) for n in range(1, 1500)]))
    await follower.catch_up()
    assert applied == list(range(1, 1501))


async def test_catch_up_starts_after_the_given_position(sqlite_recorder, applied, other_sqlite_recorder):
    await append_ok(other_sqlite_recorder, unit("acme", org(), credits(1), credits(2), credits(3)))
    follower = LogFollower(sqlite_recorder, applied, after=2)
    await follower.catch_up()
    assert applied == [3, 4]


async def test_applied_locally_applies_at_once_and_the_poll_does_not_repeat_it(
        sqlite_recorder, follower, applied):
    outcomes = await append_ok(sqlite_recorder, unit("acme", org(), credits(1)))
    follower.applied_locally(outcomes[0])
    assert (applied, follower.position) == ([1, 2], 2)
    await follower.catch_up()
    assert applied == [1, 2]


async def test_applied_locally_ignores_events_already_applied(sqlite_recorder, follower, applied):
    [events] = await append_ok(sqlite_recorder, unit("acme", org(), credits(1)))
    await follower.catch_up()
    follower.applied_locally(events)
    assert applied == [1, 2]


async def test_local_commit_ahead_of_an_unseen_foreign_one_applies_each_once(
        sqlite_recorder, follower, applied, other_sqlite_recorder):
    await append_ok(other_sqlite_recorder, unit("acme", org()))
    await follower.catch_up()
    await append_ok(other_sqlite_recorder, unit("acme", credits(2)))  # position 2, not yet seen
    [[local]] = await append_ok(sqlite_recorder, unit("acme", credits(3)))
    assert local.position == 3
    follower.applied_locally([local])
    assert (applied, follower.position) == ([1, 3], 1)
    await follower.catch_up()
    assert (applied, follower.position) == ([1, 3, 2], 3)
    [[next_local]] = await append_ok(sqlite_recorder, unit("acme", credits(4)))
    follower.applied_locally([next_local])
    await follower.catch_up()
    assert (applied, follower.position) == ([1, 3, 2, 4], 4)


async def test_local_commits_on_both_sides_of_a_foreign_one_apply_each_once(
        sqlite_recorder, follower, applied, other_sqlite_recorder):
    [[first]] = await append_ok(sqlite_recorder, unit("acme", org()))
    await append_ok(other_sqlite_recorder, unit("acme", credits(2)))
    [[third]] = await append_ok(sqlite_recorder, unit("acme", credits(3)))
    follower.applied_locally([first])
    follower.applied_locally([third])
    follower.applied_locally([third])
    assert (applied, follower.position) == ([1, 3], 1)
    await follower.catch_up()
    assert (applied, follower.position) == ([1, 3, 2], 3)


async def test_a_gap_in_local_commits_nudges_the_running_follower(
        sqlite_recorder, follower, applied, other_sqlite_recorder):
    follower.start()  # interval_s=60: only a nudge makes it poll within this test
    try:
        await append_ok(other_sqlite_recorder, unit("acme", org()))
        [[local]] = await append_ok(sqlite_recorder, unit("acme", credits(2)))
        follower.applied_locally([local])
        await eventually(lambda: follower.position == 2)
        assert applied == [2, 1]
    finally:
        await follower.stop()


async def test_start_polls_for_foreign_events_and_stop_ends_polling(sqlite_recorder, applied, other_sqlite_recorder):
    follower = LogFollower(sqlite_recorder, applied, interval_s=0.01)
    follower.start()
    try:
        await append_ok(other_sqlite_recorder, unit("acme", org(), credits(1)))
        await eventually(lambda: applied == [1, 2])
    finally:
        await follower.stop()
    assert follower._task.done()
    await append_ok(other_sqlite_recorder, unit("acme", credits(2)))
    await asyncio.sleep(0.05)
    assert (applied, follower.position) == ([1, 2], 2)


async def test_stop_before_start_does_nothing(follower, applied):
    await follower.stop()
    assert (applied, follower.position) == ([], 0)


async def test_follower_fed_by_a_writer_and_another_process_applies_everything_once(
        sqlite_recorder, applied, other_sqlite_recorder):
    follower = LogFollower(sqlite_recorder, applied, interval_s=0.01)
    writer = GroupCommitWriter(sqlite_recorder, on_commit=follower.applied_locally)
    await append_ok(sqlite_recorder, *[unit(o, org(o)) for o in ("acme", "beta")])
    await follower.catch_up()
    follower.start()
    writer.start()
    try:
        async def foreign(n):
            return await append_ok(other_sqlite_recorder, unit("beta", credits(n)))
        await asyncio.gather(*(writer.append(unit("acme", credits(n))) for n in range(1, 51)),
                             *(foreign(n) for n in range(1, 51)))
        await eventually(lambda: follower.position == 102)
    finally:
        await writer.close()
        await follower.stop()
    assert sorted(applied) == list(range(1, 103))
