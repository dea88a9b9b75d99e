"""A batch sent to its provider's own batch API (gateway.providers.capabilities.BatchProvider):
its lines uploaded in one upstream batch, which is polled every `[batches] poll_interval_s`, then
each line's result recorded and charged at the batch tier (`Prices.batched`), drawn from the
batch's hold, its answer kept as the line's content until the output file holds it.

An upstream batch is created once: its id is recorded (BatchSubmitted) as soon as it exists, and
a runner that finds none recorded asks the provider first (`find`) whether a process killed
just after creating it left one. Upstream custom_ids are the lines' places ("l0", "l1", ..),
which every provider accepts whatever the client's custom_ids are."""

import asyncio
from collections.abc import AsyncIterator

import structlog

from gateway.batches import creation, progress
from gateway.batches.endpoints import ROUTES
from gateway.batches.purse import Purse
from gateway.billing.charging import Outcome, record
from gateway.billing.pricing import Cost, cost_body, cost_fields, model_cost, usage_body
from gateway.catalogue import Resolved
from gateway.providers.base import BatchLine, BatchResult
from gateway.providers.openai import float32
from gateway.providers.capabilities import BatchProvider
from gateway.services import Services
from ledger import batch_queries
from ledger.batch_queries import BatchRow
from ledger.events import BatchSubmitted
from ledger.recorder import Append, AppendRejected

log = structlog.get_logger("gateway.batches.native")
RECORDING = 64  # results recorded at once: their appends share the writer's commits


class Upstream:
    """One native batch at its provider: the adapter, the key it is called with, the batch's model."""

    def __init__(self, services: Services, row: BatchRow, provider: BatchProvider, api_key: str,
                 model: Resolved) -> None:
        self.services, self.row, self.provider, self.api_key, self.model = services, row, provider, api_key, model

    async def lines(self) -> AsyncIterator[BatchLine]:
        async for line in progress.input_lines(self.services, self.row):
            yield BatchLine(f"l{line.index}", self.model.upstream_model, line.body)

    async def submitted(self) -> str:
        """The upstream batch: recorded, found again, or created now (and recorded at once)."""
        row = self.row
        if row.upstream_id:
            return row.upstream_id
        taken = frozenset(await batch_queries.upstream_ids(self.services.recorder, row.provider))
        found = await self.provider.find(row.batch_id, since_us=row.created_at_us, lines=row.lines, taken=taken,
                                         api_key=self.api_key)
        upstream_id = found or await self.provider.submit(self.lines(), route=row.endpoint, batch_id=row.batch_id,
                                                          api_key=self.api_key)
        await self.services.writer.append(Append(row.org_id, [BatchSubmitted(batch_id=row.batch_id,
                                                                             upstream_id=upstream_id)]))
        return upstream_id


async def run(services: Services, row: BatchRow) -> str:
    """Send the batch (once), wait for its provider to end it, record every line's result; how it
    ended: completed, cancelled or expired."""
    route = ROUTES[row.endpoint]
    plan = await creation.planned(services, progress.caller_of(row, ""), route, row.model, native=True)
    model = plan.candidates[0].model
    api_key = await services.provider_keys.key_for(row.org_id, row.provider)
    upstream = Upstream(services, row, services.providers.batch[row.provider], api_key, model)
    upstream_id = await upstream.submitted()
    why = await _ended(services, row, upstream, upstream_id)
    await _record_results(services, row, upstream, upstream_id)
    return why or "completed"


async def _ended(services: Services, row: BatchRow, upstream: Upstream, upstream_id: str) -> str | None:
    """Wait until the provider ended the batch, asking it to cancel once ours is cancelled or
    expired; why it stopped early (None: it completed)."""
    watch, asked, waited = progress.Watch(services, row), False, 0.0
    while True:
        if waited <= 0:
            state = await upstream.provider.poll(upstream_id, upstream.api_key)
            if state.ended:
                return watch.why or ("expired" if state.status == "expired" else None)
            waited = services.config.batches.poll_interval_s
        if await watch.stopped() and not asked:
            await upstream.provider.cancel(upstream_id, upstream.api_key)
            asked, waited = True, 0.0
            continue
        await asyncio.sleep(progress.CHECK_S)
        waited -= progress.CHECK_S


async def _record_results(services: Services, row: BatchRow, upstream: Upstream, upstream_id: str) -> None:
    """Record the result of every line the provider ran and the ledger lacks, RECORDING at a time."""
    lines = [(line.custom_id, line.body.get("encoding_format") == "base64")
             async for line in progress.input_lines(services, row)]
    done = await batch_queries.recorded(services.recorder, row.batch_id)
    purse = await Purse.of(services.recorder, row.org_id, row.key_id, row.hold_id)
    pending: list[tuple[int, BatchResult]] = []
    async for result in upstream.provider.results(upstream_id, route=row.endpoint, api_key=upstream.api_key):
        index = _index(result.custom_id, len(lines))
        if index is None or lines[index][0] in done or result.outcome in ("canceled", "expired"):
            continue  # not ours, recorded already, or never run (named in the error file)
        pending.append((index, result))
        if len(pending) >= RECORDING:
            await _record_all(services, row, upstream, purse, lines, pending)
    await _record_all(services, row, upstream, purse, lines, pending)


def _index(custom_id: str, lines: int) -> int | None:
    """The line an upstream custom_id names ("l" and its place), or None for one we never sent."""
    digits = custom_id.removeprefix("l")
    index = int(digits) if digits.isascii() and digits.isdigit() and custom_id.startswith("l") else -1
    return index if 0 <= index < lines else None


async def _record_all(services: Services, row: BatchRow, upstream: Upstream, purse: Purse,
                      lines: list[tuple[str, bool]], pending: list[tuple[int, BatchResult]]) -> None:
    await asyncio.gather(*(_record_line(services, row, upstream, purse, index, *lines[index], result)
                           for index, result in pending))
    pending.clear()


async def _record_line(services: Services, row: BatchRow, upstream: Upstream, purse: Purse, index: int,
                       custom_id: str, base64: bool, result: BatchResult) -> None:
    """One line's result: charged at batch prices and kept, or its failure recorded, not charged."""
    caller = progress.caller_of(row, progress.request_id(row, index), custom_id)
    model = upstream.model
    if result.reply is None:
        outcome = Outcome(route=row.endpoint, model=model.model_id, provider=model.provider_id,
                          status=result.status or 502, error=result.message or result.outcome)
        kept = None
    else:
        cost = model_cost(model.prices.batched(), result.reply.usage, services.config.billing.usd_to_inr)
        outcome = Outcome(route=row.endpoint, model=model.model_id, provider=model.provider_id, status=200,
                          usage=result.reply.usage, cost=cost, byok=bool(upstream.api_key))
        purse.reserve(caller, outcome.charged_inr_nano)
        kept = {"body": answered(row.endpoint, result, cost, base64)}
    try:
        await record(services, caller, outcome, kept)
    except AppendRejected:
        services.escrow.give_back(caller.reserved)  # recorded before this runner started: nothing to do
        caller.reserved.clear()


def answered(route: str, result: BatchResult, cost: Cost, base64: bool = False) -> dict:
    """A line's answer as its single route answers: its usage carrying the gateway's cost fields
    (embeddings in the form the line asked for: upstream is always asked for floats)."""
    assert result.reply is not None
    body, usage = result.reply.body, result.reply.body.get("usage") or {}
    if route in ("/v1/chat/completions", "/v1/completions"):
        return {**body, "usage": {**usage, **usage_body(result.reply.usage, cost)}}
    if route == "/v1/embeddings":
        data = [{**item, "embedding": float32.encode(item["embedding"])} for item in body.get("data") or ()] \
            if base64 else body.get("data")
        return {**body, "data": data, "usage": {**usage, **cost_fields(cost)}}
    return {**body, "usage": {**usage, **cost_body(cost)}}
