"""Group commit: appends from concurrent requests share one transaction.

Each caller awaits its own unit's outcome. One commit is in flight at a time; while it runs,
the next batch gathers. At low load a batch is one unit and nothing waits on a timer; at high
load thousands of units share one fsync.
"""

import asyncio
import logging
import time
from collections.abc import Callable, Sequence

from ledger.recorder import Append, LedgerUnavailable, Recorded, Recorder

log = logging.getLogger("ledger.writer")


class WriterClosed(LedgerUnavailable):
    """The writer is shutting down and takes no new appends (to a client: unavailable, retry)."""


class GroupCommitWriter:
    def __init__(self, recorder: Recorder, *, max_batch: int = 2000,
                 on_commit: Callable[[Sequence[Recorded]], None] | None = None,
                 on_batch: Callable[[int, float], None] | None = None) -> None:
        self._recorder = recorder
        self._max_batch = max_batch
        self._on_commit = on_commit
        self._on_batch = on_batch  # (batch size, seconds the commit took), for metrics
        self._pending: list[tuple[Append, asyncio.Future, float]] = []
        self._in_flight: list[tuple[Append, asyncio.Future, float]] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._closing = False
        self._failing = False  # the last commit failed: the database is probably away
        self.batches = 0
        self.largest_batch = 0

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="ledger-group-commit")

    async def append(self, unit: Append) -> list[Recorded]:
        """Record `unit` durably; returns its events, or raises why it was rejected."""
        if self._closing:
            raise WriterClosed("the ledger writer is shutting down")
        future = asyncio.get_running_loop().create_future()
        self._pending.append((unit, future, time.monotonic()))
        self._wake.set()
        return await future

    def backlog(self) -> tuple[int, float]:
        """Appends not yet committed, and the age in seconds of the oldest of them."""
        waiting = self._in_flight + self._pending
        oldest = min((queued for _, _, queued in waiting), default=None)
        return len(waiting), 0.0 if oldest is None else time.monotonic() - oldest

    async def close(self) -> None:
        """Stop taking appends, commit everything already taken, then stop."""
        self._closing = True
        self._wake.set()
        if self._task:
            await self._task

    async def _run(self) -> None:
        while not (self._closing and not self._pending):
            await self._wake.wait()
            self._wake.clear()
            while self._pending:
                self._in_flight = self._pending[:self._max_batch]
                del self._pending[:self._max_batch]
                await self._commit(self._in_flight)
                self._in_flight = []

    async def _commit(self, batch: list[tuple[Append, asyncio.Future, float]]) -> None:
        started = time.monotonic()
        try:
            outcomes = await self._recorder.append([unit for unit, _, _ in batch])
        except Exception as exc:  # noqa: BLE001 - not hidden: every caller in the batch is handed it
            # Whatever failed (an outage, a refused statement, a bug), each caller hears it and the
            # writer goes on with the next batch; a narrower catch would leave callers waiting forever.
            self._failed(exc)
            for _, future, _ in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        if self._failing:
            log.warning("ledger commits succeed again")
            self._failing = False
        self.batches += 1
        self.largest_batch = max(self.largest_batch, len(batch))
        self._observe(len(batch), time.monotonic() - started)
        for (_, future, _), outcome in zip(batch, outcomes, strict=True):  # one outcome per unit
            if future.done():
                continue
            if isinstance(outcome, Exception):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)
        # Callers resume only at the loop's next turn, so on_commit still runs before them.
        self._notify([r for o in outcomes if not isinstance(o, Exception) for r in o])

    def _failed(self, exc: Exception) -> None:
        """Log the first failure of a run of them (an outage fails every batch until it ends)."""
        if not self._failing:
            log.warning("ledger commits fail, each caller is told: %s: %s", type(exc).__name__, exc)
        self._failing = True

    def _observe(self, size: int, seconds: float) -> None:
        if not self._on_batch:
            return
        try:
            self._on_batch(size, seconds)
        except Exception:  # metrics must not stop the writer: its callers would wait forever
            log.exception("on_batch listener failed after a successful commit")

    def _notify(self, recorded: list[Recorded]) -> None:
        if not self._on_commit:
            return
        try:
            self._on_commit(recorded)
        except Exception:  # the commit stands; a broken listener must not stop later commits
            log.exception("on_commit listener failed after a successful commit")
