"""Keeps an in-memory view in step with the log, including appends made by other processes."""

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence

from ledger.recorder import LedgerUnavailable, Recorded, Recorder

log = logging.getLogger("ledger.follower")


class LogFollower:
    """Feeds every recorded event to `apply` (and to each listener added by `listen`) exactly
    once, in position order per source.

    Events this process committed are applied at once via `applied_locally` (so a request
    sees its own charge immediately); the poll then skips them while catching up on the
    positions other processes wrote in between.
    """

    def __init__(self, recorder: Recorder, apply: Callable[[Recorded], None], *,
                 after: int = 0, interval_s: float = 0.5) -> None:
        self._recorder = recorder
        self._listeners = [apply]
        self.position = after
        self._interval_s = interval_s
        self._local: set[int] = set()
        self._nudge = asyncio.Event()
        self._task: asyncio.Task | None = None
        self.unavailable = False  # the last poll found the database down; the view may lag

    def listen(self, apply: Callable[[Recorded], None]) -> None:
        """Feed `apply` every event from the next one on, after the listeners before it."""
        self._listeners.append(apply)

    def _apply(self, recorded: Recorded) -> None:
        for apply in self._listeners:
            apply(recorded)

    def applied_locally(self, recorded: Sequence[Recorded]) -> None:
        """Apply events this process has just committed, ahead of the poll."""
        gap = False
        for item in recorded:
            if item.position <= self.position or item.position in self._local:
                continue
            self._apply(item)
            if item.position == self.position + 1:
                self.position = item.position  # contiguous: nothing to read back
            else:
                self._local.add(item.position)  # someone else wrote in between: poll for it
                gap = True
        if gap:
            self._nudge.set()

    async def catch_up(self) -> None:
        """Apply everything recorded after the current position."""
        while batch := await self._recorder.read(self.position, 1000):
            for item in batch:
                if item.position <= self.position:
                    continue  # applied locally while the read was in flight
                if item.position not in self._local:
                    self._apply(item)
                self._local.discard(item.position)
                self.position = item.position

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="ledger-follower")

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):  # no nudge this interval: poll anyway
                await asyncio.wait_for(self._nudge.wait(), self._interval_s)
            self._nudge.clear()
            await self._poll()

    async def _poll(self) -> None:
        """One catch-up; an outage is logged when it starts and ends, not at every poll."""
        try:
            await self.catch_up()
        except LedgerUnavailable as exc:
            if not self.unavailable:
                log.warning("the ledger is unavailable; following resumes when it returns: %s", exc)
            self.unavailable = True
            return
        except Exception:  # keep following: a passing database error must not freeze the view
            log.exception("following the ledger failed; retrying at the next poll")
            return
        if self.unavailable:
            log.warning("the ledger is back; the view has caught up to position %d", self.position)
        self.unavailable = False
