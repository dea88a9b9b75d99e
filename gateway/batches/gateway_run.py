"""A batch the gateway runs itself: each line through its single route's own service function
(routing, failover, holds, the record and its charge, exactly as a single request), at most
`[batches] concurrency` lines in flight, each drawing from the batch's hold (gateway.batches.purse).

A line is recorded once: its request id is the batch's and its place's, and the ledger refuses a
second record of a batch's custom_id. A process killed mid-batch leaves its unrecorded lines to
the next runner, which skips every line already recorded."""

import asyncio
import contextlib

import msgspec
import structlog

from gateway.batches import creation, progress
from gateway.batches.endpoints import ROUTES, LineRoute
from gateway.batches.lines import Line
from gateway.batches.purse import Purse
from gateway.billing import reservations
from gateway.billing.charging import Outcome, record
from gateway.edge.errors import ApiError
from gateway.services import Caller, Services
from ledger import batch_queries
from ledger.batch_queries import BatchRow
from ledger.recorder import Append, AppendRejected

log = structlog.get_logger("gateway.batches.gateway_run")


async def run(services: Services, row: BatchRow) -> str:
    """Run every line not yet recorded; how the batch ends: completed, cancelled or expired."""
    route, done = ROUTES[row.endpoint], await batch_queries.recorded(services.recorder, row.batch_id)
    owner = progress.caller_of(row, "")
    plan = await creation.planned(services, owner, route, row.model, native=False)
    purse = await Purse.of(services.recorder, row.org_id, row.key_id, row.hold_id)
    watch, in_flight = progress.Watch(services, row), set[asyncio.Task]()
    try:
        async for line in progress.input_lines(services, row):
            if line.custom_id in done:
                continue
            if await watch.stopped():
                break
            await _room(in_flight, services.config.batches.concurrency)
            task = asyncio.create_task(_line(services, row, route, plan, purse, line))
            in_flight.add(task)
            task.add_done_callback(in_flight.discard)
    finally:
        await _drained(in_flight)
    return watch.why or "completed"


async def _room(in_flight: set[asyncio.Task], most: int) -> None:
    """Wait until fewer than `most` lines are in flight; a line that failed the batch raises here."""
    while len(in_flight) >= most:
        finished, _ = await asyncio.wait(in_flight, return_when=asyncio.FIRST_COMPLETED)
        for task in finished:
            task.result()


async def _drained(in_flight: set[asyncio.Task]) -> None:
    """Every line in flight finished; the first failure among them raised."""
    if in_flight:
        for task in (await asyncio.wait(set(in_flight)))[0]:
            task.result()


async def _line(services: Services, row: BatchRow, route: LineRoute, plan: creation.Plan, purse: Purse,
                line: Line) -> None:
    """One line through its route: recorded (charged, or refused and not charged) on return."""
    caller = progress.caller_of(row, progress.request_id(row, line.index), line.custom_id)
    ended: BaseException | None = None
    try:
        request: object = msgspec.convert(line.body, route.schema)
        purse.reserve(caller, await creation.worst_of(services, caller, route, line, request, plan))
        await route.run(services, caller, dict(line.body), request)
    except (ApiError, msgspec.ValidationError) as error:
        ended = error
        await _refused(services, caller, row, error)
    except asyncio.CancelledError:
        unrun(services, caller)  # the runner stopped (its turn over, a shutdown): the next one runs it
        raise
    except BaseException as error:
        ended = error
        raise
    finally:
        reservations.release_all(services, caller, row.endpoint, ended)


def unrun(services: Services, caller: Caller) -> None:
    """A line stopped before its record: what it holds given back, and no record of it (a single
    request's would be a 499), so the next runner sends it again."""
    services.escrow.give_back(caller.reserved)
    caller.reserved.clear()
    if caller.holds:
        for hold in caller.holds:
            services.leases.untrack(hold.hold_id)
        services.releases.keep(Append(caller.org_id, [hold.released() for hold in caller.holds]), caller.request_id)
        caller.holds.clear()


async def _refused(services: Services, caller: Caller, row: BatchRow, error: Exception) -> None:
    """Record a line its route refused (not charged), unless its route recorded it already."""
    status, message = (error.status, error.message) if isinstance(error, ApiError) else (400, str(error))
    # Recorded already by its route (a provider's failure, a refusal), as a single request is: rejected.
    with contextlib.suppress(AppendRejected):
        await record(services, caller, Outcome(route=row.endpoint, model=row.model, provider=row.provider,
                                               status=status, error=message))
