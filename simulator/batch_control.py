"""What the batch APIs (`simulator.openai_batches`, `simulator.anthropic_batches`) share: their
workers, the test's hold on them, result files kept in chunks, and list pages.

Control routes, beside the other ``/_sim/*`` ones (unauthenticated):

    POST /_sim/batches  ``{"paused": true|false}`` -> ``{"paused": ...}``. While paused, batches
                        are created and validated but answer no line: they stay in progress until
                        ``{"paused": false}`` (the default) lets them end. Cancelling still works.
    GET  /_sim/batches  ``{"paused": bool, "data": [{"id", "api", "status", "lines", "created_at"}]}``,
                        every batch of both APIs, oldest first (`api`: "openai" or "anthropic";
                        `status` the API's own word; `lines` its requests: for OpenAI the input
                        file's non-blank lines, 0 until it has been read).

Every batch is worked by a task held in `Batches.tasks` (so none is lost to the garbage collector)
and cancelled at app cleanup. A worker answers its lines in-process with no per-line latency,
giving the loop a turn every YIELD_EVERY lines so the server stays responsive.
"""

import asyncio
from collections.abc import Callable, Coroutine, Iterable, Sequence
from typing import Any, Protocol, TypeVar

import msgspec
import orjson
from aiohttp import web

YIELD_EVERY = 200
CHUNK_LINES = 1000  # result lines joined per stored chunk: bounded pieces, never one giant string
CONTROL_PATH = "/_sim/batches"
Item = TypeVar("Item")


class Summary(msgspec.Struct, frozen=True):
    """One batch as GET /_sim/batches lists it."""

    id: str
    api: str
    status: str
    lines: int
    created_at: int  # Unix seconds, whatever the API's own format


class BatchStore(Protocol):
    def summaries(self) -> Iterable[Summary]:
        """The store's batches, oldest first."""


class Batches:
    """The app's batch workers, the pause switch, and the stores to list."""

    def __init__(self) -> None:
        self.resumed = asyncio.Event()
        self.resumed.set()
        self.tasks: set[asyncio.Task[None]] = set()
        self.stores: list[BatchStore] = []

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run `work` as a task held until it ends."""
        task = asyncio.get_running_loop().create_task(work)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def run_lines(self, lines: Sequence[Item], cancel: asyncio.Event, answer: Callable[[Item], None]) -> int:
        """Answer `lines` in order until all are (or `cancel` is set); how many were answered."""
        for index, line in enumerate(lines):
            await self._checkpoint(index, cancel)
            if cancel.is_set():
                return index
            answer(line)
        return len(lines)

    async def _checkpoint(self, index: int, cancel: asyncio.Event) -> None:
        """Wait while paused (a cancel ends the wait); else let the loop run now and then."""
        if not self.resumed.is_set() and not cancel.is_set():
            await first_of(self.resumed, cancel)
        elif index % YIELD_EVERY == YIELD_EVERY - 1:
            await asyncio.sleep(0)

    async def close(self, app: web.Application) -> None:
        """App cleanup: stop every worker."""
        tasks = list(self.tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


BATCHES_KEY = web.AppKey("batches", Batches)


async def first_of(*events: asyncio.Event) -> None:
    """Wait until any of `events` is set."""
    waiters = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()


class Jsonl:
    """A result file built line by line, kept as chunks of CHUNK_LINES lines."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.lines = 0
        self._pending: list[bytes] = []

    def add(self, record: dict[str, Any]) -> None:
        self._pending.append(orjson.dumps(record) + b"\n")
        self.lines += 1
        if len(self._pending) >= CHUNK_LINES:
            self._flush()

    def close(self) -> list[bytes]:
        """The file's chunks, the last one included."""
        self._flush()
        return self.chunks

    def _flush(self) -> None:
        if self._pending:
            self.chunks.append(b"".join(self._pending))
            self._pending = []


async def send_chunks(request: web.Request, chunks: list[bytes], content_type: str) -> web.StreamResponse:
    """Answer 200 with the concatenation of `chunks`, written chunk by chunk."""
    response = web.StreamResponse(headers={"Content-Type": content_type})
    response.content_length = sum(len(chunk) for chunk in chunks)
    await response.prepare(request)
    for chunk in chunks:
        await response.write(chunk)
    await response.write_eof()
    return response


def page(items: Sequence[Item], ids: Callable[[Item], str], after: str | None, limit: int) -> tuple[list[Item], bool]:
    """Up to `limit` of `items` (in list order) following the one whose id is `after` (None: from the
    start; unknown: nothing), and whether more follow."""
    start = 0
    if after is not None:
        start = next((i + 1 for i, item in enumerate(items) if ids(item) == after), len(items))
    return list(items[start:start + limit]), start + limit < len(items)


def query_limit(request: web.Request, default: int, most: int) -> int | None:
    """The ``limit`` query parameter (`default` when absent); None when not an integer in 1..`most`."""
    raw = request.query.get("limit")
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        return None
    return value if 1 <= value <= most else None


class Pause(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    paused: bool


async def set_pause(request: web.Request) -> web.Response:
    """POST /_sim/batches: pause or resume every batch."""
    try:
        pause = msgspec.json.decode(await request.read(), type=Pause)
    except msgspec.DecodeError as exc:
        return web.json_response({"error": f"invalid body: {exc}"}, status=400)
    resumed = request.app[BATCHES_KEY].resumed
    if pause.paused:
        resumed.clear()
    else:
        resumed.set()
    return web.json_response({"paused": pause.paused})


async def list_batches(request: web.Request) -> web.Response:
    """GET /_sim/batches: the switch and every batch."""
    batches = request.app[BATCHES_KEY]
    data = sorted((s for store in batches.stores for s in store.summaries()), key=lambda s: s.created_at)
    body = {"paused": not batches.resumed.is_set(), "data": msgspec.to_builtins(data)}
    return web.json_response(body)


def add_batch_control(app: web.Application) -> Batches:
    """Hang the batch machinery on `app` and mount its control routes."""
    batches = app[BATCHES_KEY] = Batches()
    app.on_cleanup.append(batches.close)
    app.router.add_post(CONTROL_PATH, set_pause)
    app.router.add_get(CONTROL_PATH, list_batches)
    return batches
