"""Another process using one SQLite ledger, for the tests of several processes (not a test module).

    python ledger_process.py append PATH NAME COUNT CALLERS   appends COUNT requests (ids NAME-n)
        to the orgs "o0".."o2" through a group-commit writer with CALLERS concurrent callers, and
        prints the acknowledged request ids, one per line, once all are done.
    python ledger_process.py hold PATH                        takes the ledger's write lock,
        prints "held", and keeps it until stdin closes (or the process is killed).
    python ledger_process.py churn PATH HOLD_S                takes the write lock, keeps it
        HOLD_S, lets go and at once takes it again, forever: a process that always wants to write.
"""

import asyncio
import fcntl
import os
import sys
import time

from ledger.recorder import Append
from ledger.backends.sqlite import SQLiteRecorder
from ledger.backends import write_lock
from ledger.writer import GroupCommitWriter
from tests.ledger.ledger_helpers import request  # the test runs this with the checkout on PYTHONPATH

ORGS = ("o0", "o1", "o2")


async def append(path: str, name: str, count: int, callers: int) -> None:
    recorder = SQLiteRecorder(path)
    await recorder.open()
    writer = GroupCommitWriter(recorder)
    writer.start()
    numbers, acknowledged = iter(range(count)), []

    async def caller() -> None:
        for n in numbers:
            [recorded] = await writer.append(Append(ORGS[n % len(ORGS)], [request(f"{name}-{n}", charged=7)]))
            acknowledged.append(recorded.event.request_id)
    try:
        await asyncio.gather(*(caller() for _ in range(callers)))
    finally:
        await writer.close()
        await recorder.close()
    print("\n".join(acknowledged), flush=True)


async def hold(path: str) -> None:
    lock = write_lock.beside(path)
    async with lock.held(timeout_s=30):
        print("held", flush=True)
        await asyncio.to_thread(sys.stdin.read)


def churn(path: str, hold_s: float) -> None:
    """The lock's protocol done by hand, re-taking the lock a microsecond after letting it go:
    only the gate stands between this process and taking every turn."""
    lock = write_lock.beside(path)
    print("churning", flush=True)
    while True:
        gate, held = (os.open(name, os.O_RDWR | os.O_CREAT) for name in (lock.path + "-gate", lock.path))
        fcntl.flock(gate, fcntl.LOCK_EX)
        fcntl.flock(held, fcntl.LOCK_EX)
        os.close(gate)
        time.sleep(hold_s)  # a write in progress
        os.close(held)

if __name__ == "__main__":
    command, path, *rest = sys.argv[1:]
    if command == "append":
        asyncio.run(append(path, rest[0], int(rest[1]), int(rest[2])))
    elif command == "hold":
        asyncio.run(hold(path))
    else:
        churn(path, float(rest[0]))
