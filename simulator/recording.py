"""The record of provider requests (``/v1/``, ``/v1beta/``, ``/openai/``) and the ``/_sim/*`` control routes.

Every provider request (path under one of RECORDED_PREFIXES: the OpenAI, Vertex AI, Gemini and
Azure OpenAI route families) is recorded when it arrives (outcome "pending") and settled
exactly once; the first settlement wins, so a handler that knows better (a stream
that was dropped or whose client left) overrides the middleware's generic verdict.

Outcomes:
    completed     a success response was sent in full
    error         an error status was answered (401, 400, simulated errors, 404...)
    dropped       the simulator aborted the connection on purpose (drop_after)
    disconnected  the client went away before the response was finished
    pending       still in progress
"""

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import msgspec
import orjson
from aiohttp import web

from simulator.connection import client_gone

Outcome = Literal["completed", "disconnected", "error", "dropped", "pending"]

RECORDED_PREFIXES = ("/v1/", "/v1beta/", "/openai/")  # the last: Azure OpenAI
# Benchmarks send many requests; keep memory bounded by forgetting the oldest.
RECORD_LIMIT = 10_000


class RecordedRequest(msgspec.Struct):
    """One received request; `body` is the decoded JSON body, None if absent or not JSON
    (a multipart body is summarised by its route: fields, and the file's size and hash)."""

    seq: int
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any
    outcome: Outcome = "pending"

    def settle(self, outcome: Outcome) -> None:
        """Set the final outcome unless one was already set."""
        if self.outcome == "pending":
            self.outcome = outcome


class Recorder:
    """Requests in arrival order, at most `limit` (oldest forgotten first).

    seq numbers start at 1 and keep counting after clear(), so they stay unique.
    """

    def __init__(self, limit: int = RECORD_LIMIT) -> None:
        self._records: deque[RecordedRequest] = deque(maxlen=limit)
        self._next_seq = 1

    def add(self, request: web.Request, body: Any) -> RecordedRequest:
        """Record `request` (with its decoded `body`) as pending; returns the new record."""
        record = RecordedRequest(
            seq=self._next_seq,
            method=request.method,
            path=request.path,
            query=dict(request.query),
            headers={name.lower(): value for name, value in request.headers.items()},
            body=body,
        )
        self._next_seq += 1
        self._records.append(record)
        return record

    def __len__(self) -> int:
        return len(self._records)

    def snapshot(self) -> list[RecordedRequest]:
        """The current records, oldest first."""
        return list(self._records)

    def clear(self) -> None:
        """Forget all records (seq numbering continues)."""
        self._records.clear()


RECORDER_KEY = web.AppKey("recorder", Recorder)
RECORD_KEY = web.RequestKey("record", RecordedRequest)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def decode_body(raw: bytes) -> Any:
    """The JSON value of `raw`, or None when it is empty or not JSON."""
    if not raw:
        return None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None


@web.middleware
async def recording_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Record provider requests and settle their outcome; handlers find the record at RECORD_KEY."""
    if not request.path.startswith(RECORDED_PREFIXES):
        return await handler(request)
    # Multipart uploads may be large: the route reads them in parts and records what it saw.
    body = None if request.content_type.startswith("multipart/") else decode_body(await request.read())
    record = request.app[RECORDER_KEY].add(request, body)
    request[RECORD_KEY] = record
    outcome: Outcome = "error"  # anything escaping the handler ends up as a 500
    try:
        response = await handler(request)
        outcome = _outcome_of(request, response.status)
        return response
    except asyncio.CancelledError:
        # Only with handler_cancellation enabled: aiohttp cancels on client disconnect.
        outcome = "disconnected"
        raise
    except web.HTTPException as exc:
        outcome = _outcome_of(request, exc.status)
        raise
    finally:
        record.settle(outcome)


def _outcome_of(request: web.Request, status: int) -> Outcome:
    if status >= 400:
        return "error"
    return "disconnected" if client_gone(request) else "completed"


async def list_requests(request: web.Request) -> web.Response:
    """GET /_sim/requests -> ``{"data": [record, ...]}`` oldest first."""
    body = msgspec.json.encode({"data": request.app[RECORDER_KEY].snapshot()})
    return web.Response(body=body, content_type="application/json")


async def clear_requests(request: web.Request) -> web.Response:
    """DELETE /_sim/requests -> forget all records; ``{"cleared": n}``."""
    recorder = request.app[RECORDER_KEY]
    cleared = len(recorder)
    recorder.clear()
    return web.Response(body=orjson.dumps({"cleared": cleared}), content_type="application/json")


async def health(request: web.Request) -> web.Response:
    """GET /_sim/health -> ``{"status": "ok"}``."""
    return web.Response(body=b'{"status":"ok"}', content_type="application/json")


def add_control_routes(app: web.Application) -> None:
    """Mount the unauthenticated ``/_sim/*`` routes."""
    app.router.add_get("/_sim/requests", list_requests)
    app.router.add_delete("/_sim/requests", clear_requests)
    app.router.add_get("/_sim/health", health)
