"""OpenAI's Batch API over the Files API (`simulator.files`).

    POST /v1/batches              ``{"input_file_id", "endpoint", "completion_window": "24h", "metadata"}``
                                  -> the batch, status "validating"
    GET  /v1/batches/{id}         the batch
    POST /v1/batches/{id}/cancel  the batch, status "cancelling"
    GET  /v1/batches              ?limit=&after= -> ``{"object": "list", "data", "first_id", "last_id",
                                  "has_more"}``, newest first

The batch object is OpenAI's (`body`). Its life: "validating" while the input file is checked
(`simulator.openai_batch_lines`), then "failed" (`errors.data` naming each bad line) or
"in_progress" while its lines are answered, then "finalizing" and "completed", with
`output_file_id` / `error_file_id` (null when no line went there). `request_counts` counts the
lines: `completed` those answered below 400, `failed` those answered 400 or above, as they go.
A cancel makes it "cancelling" at once and "cancelled" once its worker stops, at its next line
(paused or not, `simulator.batch_control`): the lines answered are kept, the others go to the
error file as ``batch_cancelled``. Batches never expire here.
"""

import asyncio
import logging
import time
from collections.abc import Callable
import uuid
from typing import Any

import msgspec
from aiohttp import web

from simulator.batch_control import BATCHES_KEY, Jsonl, Summary, page, query_limit
from simulator.files import FILES_KEY, Files, list_body, not_found
from simulator.openai_batch_lines import ANSWERS, InputLine, answered, cancelled, read_lines
from simulator.openai_wire import error_response, json_response
from simulator.recording import RECORD_KEY
from simulator.settings import SETTINGS_KEY

BATCHES_PATH = "/v1/batches"
WINDOW_S = 24 * 3600
STAMPS = ("in_progress", "expires", "finalizing", "completed", "failed", "expired", "cancelling", "cancelled")
CANCELLABLE = ("validating", "in_progress", "finalizing")
MAX_METADATA = 16
log = logging.getLogger(__name__)


class CreateBatch(msgspec.Struct, forbid_unknown_fields=True):
    input_file_id: str
    endpoint: str
    completion_window: str
    metadata: dict[str, str] | None = None
    output_expires_after: dict[str, Any] | None = None


class Batch:
    """One batch: what was asked, how it stands, and the signal that stops its worker."""

    def __init__(self, asked: CreateBatch) -> None:
        self.asked, self.id = asked, f"batch_sim{uuid.uuid4().hex}"
        self.created_at, self.status = int(time.time()), "validating"
        self.stamps: dict[str, int | None] = dict.fromkeys(STAMPS)
        self.stamps["expires"] = self.created_at + WINDOW_S
        self.errors: list[dict[str, Any]] | None = None
        self.output_file_id: str | None = None
        self.error_file_id: str | None = None
        self.counts = {"total": 0, "completed": 0, "failed": 0}
        self.lines = 0  # in the input file, once read
        self.cancel = asyncio.Event()

    def move(self, status: str) -> None:
        """Enter `status`, stamping the time it did when OpenAI's object has a stamp for it."""
        self.status = status
        if status in self.stamps:
            self.stamps[status] = int(time.time())

    def body(self) -> dict[str, Any]:
        """The batch object, as OpenAI shapes it."""
        errors = None if self.errors is None else {"object": "list", "data": self.errors}
        stamps = {f"{name}_at": value for name, value in self.stamps.items()}
        return {"id": self.id, "object": "batch", "endpoint": self.asked.endpoint, "errors": errors,
                "input_file_id": self.asked.input_file_id, "completion_window": self.asked.completion_window,
                "status": self.status, "output_file_id": self.output_file_id, "error_file_id": self.error_file_id,
                "created_at": self.created_at, **stamps, "request_counts": dict(self.counts),
                "metadata": self.asked.metadata}


class OpenAIBatches:
    """The app's OpenAI batches, in creation order."""

    def __init__(self) -> None:
        self.batches: dict[str, Batch] = {}

    def summaries(self) -> list[Summary]:
        return [Summary(b.id, "openai", b.status, b.lines, b.created_at) for b in self.batches.values()]


OPENAI_BATCHES_KEY = web.AppKey("openai_batches", OpenAIBatches)


async def work(app: web.Application, batch: Batch, data: bytes) -> None:
    """Validate the input file, answer its lines, store the result files."""
    try:
        await _work(app, batch, data)
    except Exception:  # a simulator bug: show it, and end the batch rather than leave it running
        log.exception("batch %s failed", batch.id)
        batch.errors = [{"code": "server_error", "message": "The simulator failed.", "param": None, "line": None}]
        batch.move("failed")


async def _work(app: web.Application, batch: Batch, data: bytes) -> None:
    checked = read_lines(data, batch.asked.endpoint)
    batch.lines = checked.count
    if checked.errors:
        batch.errors = checked.errors
        batch.move("failed")
        return
    batch.counts["total"] = len(checked.lines)
    if not batch.cancel.is_set():  # cancelled while validating: it stays cancelling until it ends
        batch.move("in_progress")
    output, failures = Jsonl(), Jsonl()
    respond = _responder(app, batch, output, failures)
    done = await app[BATCHES_KEY].run_lines(checked.lines, batch.cancel, respond)
    for line in checked.lines[done:]:
        failures.add(cancelled(line))
    _finish(app[FILES_KEY], batch, output, failures)


def _responder(app: web.Application, batch: Batch, output: Jsonl, failures: Jsonl) -> Callable[[InputLine], None]:
    """The function that answers one line and files its result."""
    answer, settings = ANSWERS[batch.asked.endpoint], app[SETTINGS_KEY]

    def respond(line: InputLine) -> None:
        status, body = answer(settings, line.body)
        ok = status < 400
        (output if ok else failures).add(answered(line, status, body))
        batch.counts["completed" if ok else "failed"] += 1
    return respond


def _finish(files: Files, batch: Batch, output: Jsonl, failures: Jsonl) -> None:
    if not batch.cancel.is_set():  # a cancelled batch goes from cancelling to cancelled
        batch.move("finalizing")
    if output.lines:
        batch.output_file_id = files.add(output.close(), f"{batch.id}_output.jsonl", "batch_output").id
    if failures.lines:
        batch.error_file_id = files.add(failures.close(), f"{batch.id}_error.jsonl", "batch_output").id
    batch.move("cancelled" if batch.cancel.is_set() else "completed")


def check_create(asked: CreateBatch, files: Files) -> str | None:
    """Why OpenAI would refuse to create `asked` (400), or None."""
    if asked.endpoint not in ANSWERS:
        return f"'{asked.endpoint}' is not one of {list(ANSWERS)} - 'endpoint'"
    if asked.completion_window != "24h":
        return f"'{asked.completion_window}' is not one of ['24h'] - 'completion_window'"
    metadata = asked.metadata or {}
    if len(metadata) > MAX_METADATA or any(len(k) > 64 or len(v) > 512 for k, v in metadata.items()):
        return "Invalid 'metadata': at most 16 pairs, keys up to 64 characters, values up to 512."
    stored = files.get(asked.input_file_id)
    if stored is not None and stored.purpose != "batch":
        return f"The input file {asked.input_file_id} must have purpose 'batch', not '{stored.purpose}'."
    return None


async def create_batch(request: web.Request) -> web.Response:
    """POST /v1/batches."""
    try:
        asked = msgspec.convert(request[RECORD_KEY].body, CreateBatch)
    except msgspec.ValidationError as exc:
        return error_response(400, f"Invalid batch request: {exc}")
    files = request.app[FILES_KEY]
    if (problem := check_create(asked, files)) is not None:
        return error_response(400, problem)
    if (stored := files.get(asked.input_file_id)) is None:
        return not_found(asked.input_file_id)
    batch = Batch(asked)
    request.app[OPENAI_BATCHES_KEY].batches[batch.id] = batch
    request.app[BATCHES_KEY].spawn(work(request.app, batch, stored.data))
    return json_response(batch.body())


def _batch(request: web.Request) -> Batch | None:
    return request.app[OPENAI_BATCHES_KEY].batches.get(request.match_info["batch_id"])


def _no_batch(request: web.Request) -> web.Response:
    return error_response(404, f"No batch found with id '{request.match_info['batch_id']}'.")


async def retrieve_batch(request: web.Request) -> web.Response:
    """GET /v1/batches/{id}."""
    batch = _batch(request)
    return _no_batch(request) if batch is None else json_response(batch.body())


async def cancel_batch(request: web.Request) -> web.Response:
    """POST /v1/batches/{id}/cancel: "cancelling" now; the worker ends it."""
    if (batch := _batch(request)) is None:
        return _no_batch(request)
    if batch.status in CANCELLABLE:
        batch.cancel.set()
        batch.move("cancelling")
    elif batch.status != "cancelling":
        return error_response(400, f"Cannot cancel a batch with status '{batch.status}'.")
    return json_response(batch.body())


async def list_batches(request: web.Request) -> web.Response:
    """GET /v1/batches: newest first."""
    if (limit := query_limit(request, 20, 100)) is None:
        return error_response(400, "Invalid 'limit': it must be an integer from 1 to 100.")
    newest = list(request.app[OPENAI_BATCHES_KEY].batches.values())[::-1]
    shown, more = page(newest, lambda b: b.id, request.query.get("after"), limit)
    return json_response(list_body([b.body() for b in shown], more))


def add_routes(app: web.Application) -> None:
    """Hang the batch store on `app` and mount the Batch routes (the Files routes are apart)."""
    app[OPENAI_BATCHES_KEY] = store = OpenAIBatches()
    app[BATCHES_KEY].stores.append(store)
    app.router.add_post(BATCHES_PATH, create_batch)
    app.router.add_get(BATCHES_PATH, list_batches)
    app.router.add_get(BATCHES_PATH + "/{batch_id}", retrieve_batch)
    app.router.add_post(BATCHES_PATH + "/{batch_id}/cancel", cancel_batch)
