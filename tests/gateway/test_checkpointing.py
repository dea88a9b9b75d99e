"""The gateway's own checkpoints (gateway.ops.checkpointing) with processes sharing a ledger: each
wait is measured again on waking, so of two loops the first records and the other finds it recent
(not one checkpoint each); nothing new, nothing recorded.

No test counts what happens in a fixed stretch of time (a loaded machine stretches it): they wait
for checkpoints or for the loop's turns, then look at what was recorded."""

import asyncio
import contextlib
import itertools

from gateway.ops import checkpointing
from ledger import checkpoints
from ledger.backends.sqlite import SQLiteRecorder
from ledger.signing import Signer
from tests.ledger.ledger_helpers import append_ok, credits, org, unit
from tests.support import poll

INTERVAL_S = 0.3
DEADLINE_S = 60.0  # for waits on a condition: generous, a loaded machine is slow, not wrong


async def count_checkpoints(recorder) -> int:
    return len(await checkpoints.newest(recorder, None, 100))


def taking_turns(turn: asyncio.Lock):
    """A sleep for a loop that holds `turn` while it works: loops in separate processes wake apart,
    as the jitter means them to, where two tasks of one event loop could wake in the same tick."""
    async def sleep(seconds: float) -> None:
        turn.release()
        try:
            await asyncio.sleep(seconds)
        finally:
            await turn.acquire()
    return sleep


async def keep_in_turn(recorder, signer: Signer, turn: asyncio.Lock) -> None:
    await turn.acquire()
    await checkpointing.keep(recorder, signer, INTERVAL_S, sleep=taking_turns(turn))


async def appending_until(recorder, count: int) -> list[checkpoints.Checkpoint]:
    """Append (something new for each checkpoint) until `count` checkpoints exist; them, oldest first."""
    async with asyncio.timeout(DEADLINE_S):
        while await count_checkpoints(recorder) < count:
            await append_ok(recorder, unit("acme", credits(1)))
            await asyncio.sleep(0.05)
    return list(reversed(await checkpoints.newest(recorder, None, 100)))


async def stopped(*loops: asyncio.Task) -> None:
    for loop in loops:
        loop.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.gather(*loops)


async def test_two_loops_on_one_ledger_record_one_checkpoint_an_interval(tmp_path):
    recorder = SQLiteRecorder(str(tmp_path / "ledger.db"))
    await recorder.open()
    await append_ok(recorder, unit("acme", org()))
    turn = asyncio.Lock()
    loops = [asyncio.create_task(keep_in_turn(recorder, Signer.generate(), turn)) for _ in range(2)]
    try:
        recorded = await appending_until(recorder, 4)
    finally:
        await stopped(*loops)
        await recorder.close()
    gaps_us = [b.recorded_at_us - a.recorded_at_us for a, b in itertools.pairwise(recorded)]
    assert min(gaps_us) >= INTERVAL_S * 1e6, gaps_us  # one each, without measuring again: ms apart


async def test_nothing_new_is_not_checkpointed_again(tmp_path):
    recorder = SQLiteRecorder(str(tmp_path / "ledger.db"))
    await recorder.open()
    await append_ok(recorder, unit("acme", org()))
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        await asyncio.sleep(seconds)
    loop = asyncio.create_task(checkpointing.keep(recorder, None, 0.05, sleep=sleep))
    try:
        assert await poll(lambda: count_checkpoints(recorder), timeout=DEADLINE_S) == 1
        first = len(waits)
        await poll(lambda: asyncio.sleep(0, len(waits)), lambda n: n >= first + 8, timeout=DEADLINE_S)
        recorded = await count_checkpoints(recorder)
    finally:
        await stopped(loop)
        await recorder.close()
    assert recorded == 1  # eight more turns of the loop (four tries), none recorded again
