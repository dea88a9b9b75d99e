"""Running the deployment's batches: one process at a time runs them all, while it holds the
ledger's turn at the job (ledger.turns: the database ends the turn of a process that dies, even by
SIGKILL, so another takes over at once). Each batch not yet ended runs as a task of its own, its
hold's lease renewed by this process while it runs; a batch whose run failed (the ledger away, its
provider down) is tried again RETRY_S later, its recorded lines skipped."""

import asyncio
import functools
import time

import structlog

from gateway.batches import finishing, gateway_run, native
from gateway.edge.errors import ApiError, UpstreamError
from gateway.services import Services
from ledger import batch_queries
from ledger.batch_queries import BatchRow
from ledger.events import BatchLineError
from ledger.recorder import LedgerError
from ledger.turns import Turn

log = structlog.get_logger("gateway.batches")

JOB = "batches"
TICK_S = 1.0  # how often the turn holder looks for batches to start
TURN_RETRY_S = 2.0  # how often a process without the turn asks for it (a PostgreSQL connection each time)
RETRY_S = 5.0  # a batch whose run failed waits this long before it is run again


class BatchRunner:
    """This process's share of running batches: all of them, while it has the turn."""

    def __init__(self, services: Services) -> None:
        self._services = services
        self._running: dict[str, asyncio.Task] = {}
        self._retry_at: dict[str, float] = {}
        self._held: dict[str, str] = {}  # batch id -> its hold, renewed by this process

    async def run(self) -> None:
        """Forever: wait for the turn, run every batch while it lasts."""
        while True:
            turn = await self._take()
            if turn is None:
                await asyncio.sleep(TURN_RETRY_S)
                continue
            try:
                while await turn.held():
                    await self._start_due()
                    await asyncio.sleep(TICK_S)
            finally:
                await self._stop_all()
                await turn.release()

    async def _take(self) -> Turn | None:
        try:
            return await self._services.recorder.take_turn(JOB)
        except LedgerError as exc:
            log.warning("batches_turn_unavailable", error=str(exc)[:200])
            return None

    async def _start_due(self) -> None:
        try:
            rows = await batch_queries.running(self._services.recorder)
        except LedgerError as exc:
            log.warning("batches_unreadable", error=str(exc)[:200])
            return
        for row in rows:
            self._hold_alive(row)
            if row.batch_id not in self._running and self._retry_at.get(row.batch_id, 0) <= time.monotonic():
                task = asyncio.create_task(self._run_one(row), name=f"batch-{row.batch_id}")
                self._running[row.batch_id] = task
                task.add_done_callback(functools.partial(self._ended, row.batch_id))

    def _ended(self, batch_id: str, _: asyncio.Task) -> None:
        self._running.pop(batch_id, None)

    def _hold_alive(self, row: BatchRow) -> None:
        """Renew the batch's hold while it lives (up to its window and the time to finish), run
        or waiting to be run again, for as long as this process has the turn."""
        if row.hold_id:
            self._services.leases.track(row.org_id, row.hold_id)
            self._held[row.batch_id] = row.hold_id

    async def _run_one(self, row: BatchRow) -> None:
        try:
            await run_batch(self._services, row)
        except (LedgerError, UpstreamError, OSError) as exc:
            self._retry_at[row.batch_id] = time.monotonic() + RETRY_S
            log.warning("batch_run_interrupted", batch_id=row.batch_id, error=str(exc)[:300])
            return
        self._services.leases.untrack(self._held.pop(row.batch_id, ""))

    async def _stop_all(self) -> None:
        """The turn is over: stop every batch (the next holder takes them on) and renew nothing."""
        for task in self._running.values():
            task.cancel()
        await asyncio.gather(*self._running.values(), return_exceptions=True)
        for hold_id in self._held.values():
            self._services.leases.untrack(hold_id)
        self._held.clear()


async def run_batch(services: Services, row: BatchRow) -> None:
    """Run the batch to its end: its lines run (or sent and collected), its files written, ended."""
    try:
        status = await (native.run(services, row) if row.native else gateway_run.run(services, row))
    except ApiError as error:  # its input file deleted while it ran, say: it cannot go on
        await finishing.finish(services, row, "failed", (BatchLineError(code=error.code or "failed",
                                                                        message=error.message),))
        return
    await finishing.finish(services, row, status)
    log.info("batch_ended", batch_id=row.batch_id, status=status)
