"""Group commit: appends from concurrent requests share one transaction.

Each caller awaits its own unit's outcome. One commit is in flight at a time; while it runs,
the next batch gathers. At low load a batch is one unit and nothing waits on a timer; at high
load thousands of units share one fsync.

A caller may bound its wait (`within`): a unit still queued then is withdrawn, never to be
written, so the caller can say for certain that nothing was recorded. A unit already in a commit
is waited for: its outcome is the database's to give. After a commit fails for an outage the
writer says it is unavailable until a commit succeeds or a probe finds the database back.
"""

import asyncio
import logging
import time
from collections.abc import Callable, Sequence

from ledger import queries
from ledger.recorder import Append, LedgerUnavailable, Recorded, Recorder

log = logging.getLogger("ledger.writer")


class WriterClosed(LedgerUnavailable):
    """The writer is shutting down and takes no new appends (to a client: unavailable, retry)."""


class Withdrawn(LedgerUnavailable):
    """The unit waited longer than its caller allowed and was taken out of the queue unwritten."""


# A commit waited on this long means the ledger is stuck, whatever else looks fine (health says so too).
STUCK_S = 10.0


class GroupCommitWriter:
    def __init__(self, recorder: Recorder, *, max_batch: int = 2000,
                 on_commit: Callable[[Sequence[Recorded]], None] | None = None,
                 on_batch: Callable[[int, float], None] | None = None, probe_s: float = 0.5) -> None:
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
        self._probe_s = probe_s  # while failing and idle, how often the database is asked if it is back
        self.batches = 0
        self.largest_batch = 0

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="ledger-group-commit")

    async def append(self, unit: Append, within: float | None = None) -> list[Recorded]:
        """Record `unit` durably; returns its events, or raises why it was rejected. With `within`
        (seconds), a unit not yet in a commit by then is withdrawn unwritten (Withdrawn)."""
        if self._closing:
            raise WriterClosed("the ledger writer is shutting down")
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        entry = (unit, future, time.monotonic())
        self._pending.append(entry)
        self._wake.set()
        if within is not None:  # a timer, not a task: the common case (taken in time) costs one handle
            timer = loop.call_later(within, self._withdraw, entry, within)
            future.add_done_callback(lambda _: timer.cancel())
        return await future

    def _withdraw(self, entry: tuple[Append, asyncio.Future, float], within: float) -> None:
        """Take `entry` out of the queue and fail it, if it is still there (not in a commit: that
        one's outcome is the database's to give)."""
        for index, (_, future, _) in enumerate(self._pending):
            if future is entry[1]:
                del self._pending[index]
                future.set_exception(Withdrawn(f"the ledger did not take this record within {within:g} s;"
                                               " it was withdrawn unwritten"))
                return

    @property
    def available(self) -> bool:
        """False while the ledger is known to be away: the last commit failed for an outage (and no
        probe found the database back since), or a commit has waited past STUCK_S."""
        return not self._failing and self._oldest_age() < STUCK_S

    def _oldest_age(self) -> float:
        """backlog()'s age without its count: both lists are in the order appends arrived."""
        oldest = self._in_flight or self._pending
        return time.monotonic() - oldest[0][2] if oldest else 0.0

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
            await self._woken()
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

    async def _woken(self) -> None:
        """Wait for work; while failing, ask the database every probe_s whether it is back, so a
        gateway that refuses paid requests meanwhile (nothing to commit) learns when to stop."""
        while self._failing:
            try:
                await asyncio.wait_for(self._wake.wait(), self._probe_s)
                return
            except TimeoutError:
                await self._probe()
        await self._wake.wait()

    async def _probe(self) -> None:
        try:
            await queries.ping(self._recorder)
        except LedgerUnavailable:
            return
        log.warning("the ledger database answers again")
        self._failing = False

    def _failed(self, exc: Exception) -> None:
        """Log the first failure of a run of them (an outage fails every batch until it ends)."""
        if not isinstance(exc, LedgerUnavailable):
            log.warning("a ledger commit failed, each caller is told: %s: %s", type(exc).__name__, exc)
            return  # a refused statement or a bug: the database itself is there
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
