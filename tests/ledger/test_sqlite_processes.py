"""Several processes writing one SQLite ledger (issue 13): `gateway serve --workers N`, the admin
CLI beside a running server. Writers queue on the ledger's inter-process write lock
(ledger.backends.write_lock) and are woken when it is let go, instead of sleeping in SQLite's busy
handler; a holder that keeps it past the timeout makes a write LedgerUnavailable, and a holder
that dies (even by SIGKILL) frees it at once.

The other processes are real ones, running tests/ledger/ledger_process.py.
"""

import asyncio
import os
import signal
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from ledger import audit
from ledger.recorder import LedgerUnavailable
from ledger.backends.sqlite import SQLiteRecorder
from tests.ledger.ledger_helpers import append_ok, credits, org, request, unit

HELPER = str(Path(__file__).with_name("ledger_process.py"))
ROOT = str(Path(__file__).resolve().parents[2])
TIMEOUT_S = 0.5


async def start(*args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, HELPER, *args, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env={**os.environ, "PYTHONPATH": ROOT})


async def first_line(proc: asyncio.subprocess.Process) -> str:
    line = await asyncio.wait_for(proc.stdout.readline(), 20)
    assert line, (await proc.stderr.read()).decode()
    return line.decode().strip()


async def finished(proc: asyncio.subprocess.Process) -> list[str]:
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    return out.decode().split()


@pytest.fixture
async def ledger(ledger_path):
    recorder = SQLiteRecorder(str(ledger_path), timeout_s=TIMEOUT_S)
    await recorder.open()
    await append_ok(recorder, *[unit(o, org(o), credits(10**12)) for o in ("o0", "o1", "o2")])
    yield recorder
    await recorder.close()


@pytest.fixture
async def holder(ledger_path, ledger):
    """Another process holding the ledger's write lock until the test lets go of it."""
    proc = await start("hold", str(ledger_path))
    assert await first_line(proc) == "held"
    yield proc
    if proc.returncode is None:
        proc.kill()
    await proc.wait()


async def test_processes_appending_to_one_file_at_once_lose_and_duplicate_nothing(ledger, ledger_path):
    procs = [await start("append", str(ledger_path), f"p{n}", "300", "40") for n in range(3)]
    local = [await append_ok(ledger, unit(f"o{n % 3}", request(f"local-{n}", charged=7))) for n in range(30)]
    acknowledged = [request_id for proc in procs for request_id in await finished(proc)]
    assert len(acknowledged) == 900 and len(local) == 30

    events = await ledger.read(0, 10_000)
    assert [r.position for r in events] == list(range(1, len(events) + 1))  # gapless, in commit order
    charged = Counter(r.event.request_id for r in events if hasattr(r.event, "request_id"))
    assert set(charged.values()) == {1} and set(charged) == {*acknowledged, *(f"local-{n}" for n in range(30))}
    for o in ("o0", "o1", "o2"):
        assert [r.version for r in await ledger.read_stream(o)] == list(range(1, 2 + 310 + 1))
    assert await ledger._fetch("SELECT SUM(spent_inr_nano), SUM(requests) FROM orgs") == [(930 * 7, 930)]
    assert await audit.verify(ledger) == (len(events), [])


async def test_a_write_waits_for_the_process_holding_the_lock_and_goes_on_when_it_lets_go(ledger, holder):
    waiting = asyncio.create_task(ledger.append([unit("o0", request("r1"))]))
    await asyncio.sleep(0.3)  # SQLite's own lock is free all along: only the write lock holds it back
    assert not waiting.done()
    assert await ledger._fetch("SELECT COUNT(*) FROM events") == [(6,)]  # WAL: reads go on
    holder.stdin.close()  # the holder lets go
    [recorded] = await asyncio.wait_for(waiting, TIMEOUT_S)
    assert recorded[0].event.request_id == "r1"


async def test_the_lock_held_past_the_timeout_is_ledger_unavailable_and_a_killed_holder_frees_it(ledger, holder):
    started = time.monotonic()
    with pytest.raises(LedgerUnavailable, match="TimeoutError"):
        await ledger.append([unit("o0", request("r1"))])
    assert TIMEOUT_S <= time.monotonic() - started < TIMEOUT_S + 5  # its own timeout (room for a loaded machine)
    with pytest.raises(LedgerUnavailable):  # a wait given up on left nothing behind in this process
        await ledger.append([unit("o0", request("r2"))])
    holder.send_signal(signal.SIGKILL)  # the kernel drops a dead process's lock
    await holder.wait()
    await append_ok(ledger, unit("o0", request("r3")))
    assert [r.event.request_id for r in (await ledger.read(6))] == ["r3"]


async def test_a_process_that_always_wants_the_lock_still_lets_a_waiter_have_its_turn(ledger, ledger_path):
    churner = await start("churn", str(ledger_path), "0.02")
    try:
        assert await first_line(churner) == "churning"
        for n in range(20):  # each waits for one turn of the churner, well within the timeout
            await append_ok(ledger, unit("o0", request(f"r{n}")))
    finally:
        churner.kill()
        await churner.wait()
    assert len(await ledger.read_stream("o0")) == 2 + 20


async def test_opening_waits_past_the_timeout_for_another_process_creating_or_upgrading_the_file(
        ledger, ledger_path, holder):
    # `gateway serve --workers N`: every worker opens at once and one of them upgrades the schema,
    # which may take far longer than one write; the others wait for it instead of failing to start.
    other = SQLiteRecorder(str(ledger_path), timeout_s=TIMEOUT_S)
    opening = asyncio.create_task(other.open())
    try:
        await asyncio.sleep(TIMEOUT_S * 3)
        assert not opening.done()
        holder.stdin.close()  # the "upgrade" is done
        await asyncio.wait_for(opening, 5)
        assert len(await other.read_stream("o0")) == 2
    finally:
        await asyncio.wait([opening])
        await other.close()
