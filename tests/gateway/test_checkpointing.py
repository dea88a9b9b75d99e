"""The gateway's own checkpoints (gateway.ops.checkpointing) with processes sharing a ledger: each
wait is measured again on waking, so of two loops the first records and the other finds it recent
(not one checkpoint each); nothing new, nothing recorded."""

import asyncio
import contextlib

from gateway.ops import checkpointing
from ledger import checkpoints
from ledger.backends.sqlite import SQLiteRecorder
from ledger.signing import Signer
from tests.ledger.ledger_helpers import append_ok, credits, org, unit

INTERVAL_S = 0.3


async def count_checkpoints(recorder) -> int:
    return len(await checkpoints.newest(recorder, None, 100))


async def test_two_loops_on_one_ledger_record_about_one_checkpoint_an_interval(tmp_path):
    recorder = SQLiteRecorder(str(tmp_path / "ledger.db"))
    await recorder.open()
    await append_ok(recorder, unit("acme", org()))
    signer = Signer.generate()
    loops = [asyncio.create_task(checkpointing.keep(recorder, signer, INTERVAL_S)) for _ in range(2)]
    try:
        for _ in range(30):  # 1.5 s of appends: five intervals
            await append_ok(recorder, unit("acme", credits(1)))
            await asyncio.sleep(0.05)
        recorded = await count_checkpoints(recorder)
    finally:
        for loop in loops:
            loop.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*loops)
        await recorder.close()
    assert 2 <= recorded <= 6  # one loop alone: about 5; one each, without measuring again: about 10


async def test_nothing_new_is_not_checkpointed_again(tmp_path):
    recorder = SQLiteRecorder(str(tmp_path / "ledger.db"))
    await recorder.open()
    await append_ok(recorder, unit("acme", org()))
    loop = asyncio.create_task(checkpointing.keep(recorder, None, 0.05))
    try:
        await asyncio.sleep(0.6)
        recorded = await count_checkpoints(recorder)
    finally:
        loop.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await loop
        await recorder.close()
    assert recorded == 1
