"""What the batch routes do, in both APIs' shapes: create (checked, held, recorded), read, list,
cancel, and Anthropic's results. Running a batch is gateway.batches.running's."""

from collections.abc import AsyncIterator
from typing import Annotated, Literal

import msgspec

from gateway.batches import files, lines
from gateway.batches.creation import Order, create
from gateway.batches.endpoints import ROUTES
from gateway.edge.errors import ApiError, bad_request
from gateway.jsonio import encode
from gateway.messages.service import ROUTE as MESSAGES
from gateway.services import Caller, Services
from ledger import batch_queries
from ledger.batch_queries import BatchRow
from ledger.events import BatchCancelRequested
from ledger.recorder import Append

MetadataKey = Annotated[str, msgspec.Meta(max_length=64)]
MetadataValue = Annotated[str, msgspec.Meta(max_length=512)]


class BatchRequest(msgspec.Struct):
    """POST /v1/batches, as OpenAI takes it."""

    input_file_id: str
    endpoint: Literal["/v1/chat/completions", "/v1/embeddings", "/v1/responses", "/v1/completions"]
    completion_window: Literal["24h"]
    metadata: Annotated[dict[MetadataKey, MetadataValue], msgspec.Meta(max_length=16)] | None = None


class BatchedMessage(msgspec.Struct):
    custom_id: str
    params: msgspec.Raw  # kept as sent: each is checked as its own line (gateway.batches.lines)


class MessageBatchRequest(msgspec.Struct):
    """POST /v1/messages/batches, as Anthropic takes it."""

    requests: Annotated[list[BatchedMessage], msgspec.Meta(min_length=1, max_length=lines.MAX_LINES)]


async def create_openai(services: Services, caller: Caller, request: BatchRequest) -> BatchRow:
    order = Order(api="openai", endpoint=request.endpoint, route=ROUTES[request.endpoint],
                  input_file_id=request.input_file_id, metadata=request.metadata or {})
    return await _row(services, caller, await create(services, caller, order))


async def create_anthropic(services: Services, caller: Caller, request: MessageBatchRequest) -> BatchRow:
    """The requests kept as the batch's input file (one line each), then created as any batch."""
    record = await files.write_file(services, caller.org_id, caller.principal.key_id, purpose="batch",
                                    filename="message_batch_requests.jsonl", chunks=_jsonl(request),
                                    lines=len(request.requests))
    order = Order(api="anthropic", endpoint=MESSAGES, route=ROUTES[MESSAGES], input_file_id=record.file_id)
    return await _row(services, caller, await create(services, caller, order))


async def _jsonl(request: MessageBatchRequest) -> AsyncIterator[bytes]:
    for item in request.requests:
        yield b'{"custom_id":' + encode(item.custom_id) + b',"params":' + bytes(item.params) + b"}\n"


async def _row(services: Services, caller: Caller, batch_id: str) -> BatchRow:
    row = await batch_queries.batch(services.recorder, caller.org_id, batch_id)
    if row is None:  # written just now, so read back at once: only a broken ledger lacks it
        raise ApiError(503, "the batch was recorded but cannot be read back yet; retry", type="service_unavailable")
    return row


async def owned(services: Services, caller: Caller, batch_id: str, api: str) -> BatchRow:
    """The org's batch asked in `api`'s shape; 404 otherwise (another org's included)."""
    row = await batch_queries.batch(services.recorder, caller.org_id, batch_id)
    if row is None or row.api != api:
        raise ApiError(404, f"no batch {batch_id!r}", type="not_found_error", code="not_found")
    return row


async def cancel(services: Services, caller: Caller, batch_id: str, api: str) -> BatchRow:
    """Ask for the batch to stop: its finished lines are kept and charged, the rest released. A batch
    that ended already stays as it is."""
    row = await owned(services, caller, batch_id, api)
    if row.ended_at_us is None and row.cancel_requested_at_us is None:
        await services.writer.append(Append(caller.org_id, [BatchCancelRequested(batch_id=batch_id)]))
    return await owned(services, caller, batch_id, api)


async def listing(services: Services, caller: Caller, api: str, limit: int, after: str | None) -> list[BatchRow]:
    """The org's batches, newest first, after the batch `after` (`limit` + 1 read: has_more)."""
    before = None
    if after:
        before = (await owned(services, caller, after, api)).position
    return await batch_queries.page(services.recorder, caller.org_id, api, before, limit + 1)


async def results(services: Services, caller: Caller, batch_id: str) -> AsyncIterator[bytes]:
    """An ended Anthropic batch's results (JSONL, streamed); 400 while it runs."""
    row = await owned(services, caller, batch_id, "anthropic")
    if row.ended_at_us is None or not row.output_file_id:
        raise bad_request(f"batch {batch_id} has not ended yet; its results are ready once processing_status is"
                          " ended")
    record = await files.owned_file(services, caller.org_id, row.output_file_id)
    return files.read_file(services, record)
