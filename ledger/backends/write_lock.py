"""One writer at a time across every process that writes one SQLite ledger, without sleeping.

SQLite's own busy handler polls: a writer that finds the database locked sleeps (up to 100 ms
a try) and tries again, so two busy processes on one file wait on each other's sleeps (p99 of
hundreds of ms). An exclusive `flock` on a file beside the database instead puts a waiter to
sleep in the kernel, which wakes it the instant the holder lets go; only the holder then asks
SQLite for its write lock, which is free, so SQLite never has to wait. The kernel drops the
lock of a process that dies, even by SIGKILL.

Fairness: a holder that lets go and at once wants the lock again would often win it back
before the woken waiter runs. Every acquirer therefore first passes a gate (a second flock),
and a waiter keeps the gate while it waits for the lock: the holder's next turn queues behind
it, so busy processes take turns.

A blocking flock has no timeout, so a contended wait runs in one daemon thread per lock; the
caller stops waiting after its timeout, and a wait it gave up hands the lock straight back.
"""

import asyncio
import contextlib
import fcntl
import os
import queue
import threading
from collections.abc import AsyncIterator


class Held:
    """The two descriptors of a granted lock; closing them releases it."""

    def __init__(self, gate: int, lock: int) -> None:
        self.gate, self.lock = gate, lock

    def release(self) -> None:
        for fd in (self.lock, self.gate):
            if fd >= 0:
                os.close(fd)  # closing the file's only descriptor drops its flock
        self.gate = self.lock = -1

    def pass_gate(self) -> None:
        """Let the next acquirer queue for the lock (this one holds it now)."""
        os.close(self.gate)
        self.gate = -1


def _open(path: str) -> int:
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)


def _try_flock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


class WriteLock:
    """An inter-process lock on `path` (and `path` + "-gate"), held around each write transaction."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._requests: queue.SimpleQueue = queue.SimpleQueue()
        self._waiter: threading.Thread | None = None

    @contextlib.asynccontextmanager
    async def held(self, timeout_s: float) -> AsyncIterator[None]:
        """Hold the lock for the block; TimeoutError if another process keeps it past `timeout_s`."""
        held = await self._acquire(timeout_s)
        try:
            yield
        finally:
            held.release()

    async def _acquire(self, timeout_s: float) -> Held:
        held = Held(_open(self.path + "-gate"), -1)
        try:
            held.lock = _open(self.path)
            if _try_flock(held.gate) and _try_flock(held.lock):  # uncontended: no thread hop
                held.pass_gate()
                return held
        except BaseException:
            held.release()
            raise
        return await self._wait(held, timeout_s)

    async def _wait(self, held: Held, timeout_s: float) -> Held:
        loop = asyncio.get_running_loop()
        granted = loop.create_future()
        self._start_waiter()
        self._requests.put((held, granted, loop))
        try:
            await asyncio.wait_for(asyncio.shield(granted), timeout_s)
        except BaseException:  # timed out or cancelled: a grant that comes later is handed back
            if not granted.cancel() and granted.exception() is None:  # granted as the wait ended
                held.release()
            raise
        held.pass_gate()
        return held

    def _start_waiter(self) -> None:
        if self._waiter is None or not self._waiter.is_alive():
            # A daemon: a process must be able to exit while another process holds the lock.
            self._waiter = threading.Thread(target=self._wait_in_thread, name="ledger-write-lock", daemon=True)
            self._waiter.start()

    def close(self) -> None:
        if self._waiter is not None:
            self._requests.put(None)
            self._waiter = None

    def _wait_in_thread(self) -> None:
        while (request := self._requests.get()) is not None:
            held, granted, loop = request
            try:
                if not granted.cancelled():  # a read across threads; a stale answer only costs a wait
                    fcntl.flock(held.gate, fcntl.LOCK_EX)  # re-locking a held flock is a no-op
                    fcntl.flock(held.lock, fcntl.LOCK_EX)
                loop.call_soon_threadsafe(_grant, held, granted, None)
            except OSError as exc:
                loop.call_soon_threadsafe(_grant, held, granted, exc)
            except RuntimeError:  # the caller's loop is closed: nobody will take the lock
                held.release()


def _grant(held: Held, granted: asyncio.Future, error: OSError | None) -> None:
    """In the caller's loop, which alone decides whether the waiter still wants the lock."""
    if granted.cancelled():
        held.release()
    elif error is not None:
        held.release()
        granted.set_exception(error)
    else:
        granted.set_result(None)


def beside(database: str) -> WriteLock:
    """The write lock of the SQLite database at `database`, in files next to it."""
    return WriteLock(f"{database}-lock")
