"""Anthropic's Message Batches API.

    POST   /v1/messages/batches               ``{"requests": [{"custom_id", "params"}]}`` -> the batch
    GET    /v1/messages/batches/{id}          the batch
    GET    /v1/messages/batches/{id}/results  its results, JSONL, once it has ended
    POST   /v1/messages/batches/{id}/cancel   the batch, "canceling"
    GET    /v1/messages/batches               ?limit=&after_id=&before_id= -> ``{"data", "has_more",
                                              "first_id", "last_id"}``, newest first
    DELETE /v1/messages/batches/{id}          ``{"id", "type": "message_batch_deleted"}`` (ended batches only)

The batch object is Anthropic's (`MessageBatch.body`): times in RFC 3339, `request_counts` all
`processing` until the batch ends (Anthropic moves them only then), `results_url` null until it
ends, then this simulator's results route at the host the request was sent to.
The create request is checked as Anthropic checks it (400): 1 to MAX_REQUESTS requests, each
`custom_id` of ``[a-zA-Z0-9_-]{1,64}`` and unique, `params` an object. The params themselves
are checked as each request is answered, as Anthropic does: by the Messages logic in-process
(`anthropic_messages.json_answer`: directives, cache and tier ones included, timing ones left
out), reporting service tier "batch" unless ``[sim:served_tier=NAME]`` names another. Each
result line is ``{"custom_id", "result": ...}`` with ``{"type": "succeeded", "message"}``,
``{"type": "errored", "error": {"type": "error", "error": {"type", "message"}}}`` (status 400 or
above), or ``{"type": "canceled"}`` for a request a cancel left unanswered: a cancel makes the
batch "canceling" at once and "ended" once its worker stops, at its next request, paused or not
(`simulator.batch_control`). Batches never expire here.
"""

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

import msgspec
from aiohttp import web

from simulator import anthropic_messages
from simulator import anthropic_wire as wire
from simulator.batch_control import BATCHES_KEY, Jsonl, Summary, page, query_limit, send_chunks
from simulator.recording import RECORD_KEY
from simulator.settings import SETTINGS_KEY, Settings

BATCHES_PATH = "/v1/messages/batches"
MAX_REQUESTS = 100_000
BATCH_TIER = "batch"
WINDOW = timedelta(hours=24)
OUTCOMES = ("succeeded", "errored", "canceled", "expired")
log = logging.getLogger(__name__)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class BatchRequest(msgspec.Struct, forbid_unknown_fields=True):
    custom_id: Annotated[str, msgspec.Meta(pattern=r"^[a-zA-Z0-9_-]{1,64}$")]
    params: dict[str, Any]


class CreateBatch(msgspec.Struct, forbid_unknown_fields=True):
    requests: Annotated[list[BatchRequest], msgspec.Meta(min_length=1, max_length=MAX_REQUESTS)]


def rfc3339(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat().replace("+00:00", "Z")


class MessageBatch:
    """One batch: its requests, how it stands, its results, and the signal that stops its worker."""

    def __init__(self, requests: list[BatchRequest]) -> None:
        self.id, self.requests = f"msgbatch_sim{uuid.uuid4().hex[:24]}", requests
        self.created_at, self.status = datetime.now(UTC), "in_progress"
        self.ended_at: datetime | None = None
        self.cancel_initiated_at: datetime | None = None
        self.tally = dict.fromkeys(OUTCOMES, 0)  # as the requests go; shown once the batch ends
        self.results = Jsonl()
        self.cancel = asyncio.Event()

    def end(self, answered: int) -> None:
        """End the batch once its first `answered` requests are; a cancel left the others canceled."""
        for request in self.requests[answered:]:
            self.results.add({"custom_id": request.custom_id, "result": {"type": "canceled"}})
            self.tally["canceled"] += 1
        self.status, self.ended_at = "ended", datetime.now(UTC)
        self.results.close()

    def body(self, origin: str) -> dict[str, Any]:
        """The batch object, as Anthropic shapes it; `origin` the scheme and host it was asked at."""
        ended = self.status == "ended"
        counts = {"processing": 0, **self.tally} if ended else {
            "processing": len(self.requests), **dict.fromkeys(OUTCOMES, 0)}
        return {"id": self.id, "type": "message_batch", "processing_status": self.status,
                "request_counts": counts, "ended_at": rfc3339(self.ended_at),
                "created_at": rfc3339(self.created_at), "expires_at": rfc3339(self.created_at + WINDOW),
                "cancel_initiated_at": rfc3339(self.cancel_initiated_at), "archived_at": None,
                "results_url": f"{origin}{BATCHES_PATH}/{self.id}/results" if ended else None}


class MessageBatches:
    """The app's message batches, in creation order."""

    def __init__(self) -> None:
        self.batches: dict[str, MessageBatch] = {}

    def summaries(self) -> list[Summary]:
        return [Summary(b.id, "anthropic", b.status, len(b.requests), int(b.created_at.timestamp()))
                for b in self.batches.values()]


MESSAGE_BATCHES_KEY = web.AppKey("message_batches", MessageBatches)


def result(status: int, body: dict[str, Any]) -> dict[str, Any]:
    """A request's `result`: the message, or the error of its `body`."""
    if status < 400:
        return {"type": "succeeded", "message": body}
    return {"type": "errored", "error": {"type": "error", "error": body["error"]}}


async def work(app: web.Application, batch: MessageBatch) -> None:
    """Answer the batch's requests, then end it."""
    try:
        done = await app[BATCHES_KEY].run_lines(batch.requests, batch.cancel, _responder(app[SETTINGS_KEY], batch))
    except Exception:  # a simulator bug: show it, and end the batch rather than leave it running
        log.exception("message batch %s failed", batch.id)
        done = batch.results.lines
    batch.end(done)


def _responder(settings: Settings, batch: MessageBatch) -> Callable[[BatchRequest], None]:
    """The function that answers one request and files its result."""
    def respond(request: BatchRequest) -> None:
        status, body = anthropic_messages.json_answer(settings, request.params, BATCH_TIER)
        batch.results.add({"custom_id": request.custom_id, "result": result(status, body)})
        batch.tally["succeeded" if status < 400 else "errored"] += 1
    return respond


def versioned(handler: Handler) -> Handler:
    """`handler` behind Anthropic's demand for an ``anthropic-version`` header."""
    async def checked(request: web.Request) -> web.StreamResponse:
        if not request.headers.get("anthropic-version"):
            return wire.error_response(400, "anthropic-version: header is required")
        return await handler(request)
    return checked


def origin(request: web.Request) -> str:
    return str(request.url.origin())


def parse_create(body: Any) -> CreateBatch:
    """The create request; wire.BadRequest as Anthropic words it."""
    try:
        asked = msgspec.convert(body, CreateBatch)
    except msgspec.ValidationError as exc:
        raise wire.BadRequest(f"requests: {exc}") from exc
    ids = [request.custom_id for request in asked.requests]
    if len(set(ids)) != len(ids):
        raise wire.BadRequest("requests: custom_id values must be unique within a message batch")
    return asked


async def create_batch(request: web.Request) -> web.Response:
    """POST /v1/messages/batches."""
    try:
        asked = parse_create(request[RECORD_KEY].body)
    except wire.BadRequest as exc:
        return wire.error_response(400, str(exc))
    batch = MessageBatch(asked.requests)
    request.app[MESSAGE_BATCHES_KEY].batches[batch.id] = batch
    request.app[BATCHES_KEY].spawn(work(request.app, batch))
    return wire.json_response(batch.body(origin(request)))


def _batch(request: web.Request) -> MessageBatch | None:
    return request.app[MESSAGE_BATCHES_KEY].batches.get(request.match_info["batch_id"])


def _no_batch(request: web.Request) -> web.Response:
    return wire.error_response(404, f"message batch {request.match_info['batch_id']} not found")


async def retrieve_batch(request: web.Request) -> web.Response:
    """GET /v1/messages/batches/{id}."""
    batch = _batch(request)
    return _no_batch(request) if batch is None else wire.json_response(batch.body(origin(request)))


async def batch_results(request: web.Request) -> web.StreamResponse:
    """GET /v1/messages/batches/{id}/results: JSONL, sent chunk by chunk."""
    if (batch := _batch(request)) is None:
        return _no_batch(request)
    if batch.status != "ended":
        return wire.error_response(400, f"message batch {batch.id} has not ended: its results are not ready")
    return await send_chunks(request, batch.results.chunks, "application/x-jsonl")


async def cancel_batch(request: web.Request) -> web.Response:
    """POST /v1/messages/batches/{id}/cancel: "canceling" now; the worker ends it."""
    if (batch := _batch(request)) is None:
        return _no_batch(request)
    if batch.status == "ended":
        return wire.error_response(400, f"message batch {batch.id} has already ended and cannot be canceled")
    if batch.status == "in_progress":
        batch.status, batch.cancel_initiated_at = "canceling", datetime.now(UTC)
        batch.cancel.set()
    return wire.json_response(batch.body(origin(request)))


async def delete_batch(request: web.Request) -> web.Response:
    """DELETE /v1/messages/batches/{id}: only once it has ended, as Anthropic demands."""
    if (batch := _batch(request)) is None:
        return _no_batch(request)
    if batch.status != "ended":
        return wire.error_response(400, f"message batch {batch.id} is still processing: cancel it before"
                                        " deleting it")
    del request.app[MESSAGE_BATCHES_KEY].batches[batch.id]
    return wire.json_response({"id": batch.id, "type": "message_batch_deleted"})


async def list_batches(request: web.Request) -> web.Response:
    """GET /v1/messages/batches: newest first, paged by after_id or before_id."""
    if (limit := query_limit(request, 20, 1000)) is None:
        return wire.error_response(400, "limit: Input should be an integer from 1 to 1000")
    newest = list(request.app[MESSAGE_BATCHES_KEY].batches.values())[::-1]
    before = request.query.get("before_id")
    if before is not None:
        shown, more = page_before(newest, before, limit)
    else:
        shown, more = page(newest, lambda b: b.id, request.query.get("after_id"), limit)
    data = [b.body(origin(request)) for b in shown]
    return wire.json_response({"data": data, "has_more": more, "first_id": data[0]["id"] if data else None,
                               "last_id": data[-1]["id"] if data else None})


def page_before(items: list[MessageBatch], before: str, limit: int) -> tuple[list[MessageBatch], bool]:
    """Up to `limit` items just before the one whose id is `before` (unknown: none), and whether
    more come before them."""
    end = next((i for i, item in enumerate(items) if item.id == before), 0)
    start = max(end - limit, 0)
    return items[start:end], start > 0


def add_routes(app: web.Application) -> None:
    """Hang the batch store on `app` and mount the Message Batches routes."""
    app[MESSAGE_BATCHES_KEY] = store = MessageBatches()
    app[BATCHES_KEY].stores.append(store)
    app.router.add_post(BATCHES_PATH, versioned(create_batch))
    app.router.add_get(BATCHES_PATH, versioned(list_batches))
    app.router.add_get(BATCHES_PATH + "/{batch_id}", versioned(retrieve_batch))
    app.router.add_delete(BATCHES_PATH + "/{batch_id}", versioned(delete_batch))
    app.router.add_get(BATCHES_PATH + "/{batch_id}/results", versioned(batch_results))
    app.router.add_post(BATCHES_PATH + "/{batch_id}/cancel", versioned(cancel_batch))
