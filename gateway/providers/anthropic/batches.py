"""Anthropic's Message Batches as a BatchProvider: one JSON body of `requests` sent while the lines
are read, polled until `ended`, its results file read line by line. /v1/messages lines go up as
the native Messages path sends them; /v1/chat/completions lines translated as the chat path
translates them (`adapter.chat_request`) and their answers back (`adapter.chat_reply`).

Anthropic keeps no marks on a batch, so `find` knows one again by when it was created and how
many requests it holds. Its custom_ids must match ^[a-zA-Z0-9_-]{1,64}$ or the whole batch is
refused (400)."""

from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any
from urllib.parse import quote

import aiohttp
import msgspec

from gateway.config import ProviderConfig
from gateway.edge.errors import UpstreamError
from gateway.jsonio import encode
from gateway.providers import shapes
from gateway.providers.anthropic import wire
from gateway.providers.anthropic.adapter import AnthropicProvider, chat_reply, chat_request, messages_request
from gateway.providers.base import BatchLine, BatchResult, ChatCall, ChatReply, UpstreamBatch
from gateway.providers.http import Upstream, get, post, read_json, timeout_for
from gateway.providers.openai.jsonl import cut, records, uploaded

PROVIDER = "anthropic"
PAGE = "100"  # batches listed per request, Anthropic's most
SLACK_US = 5_000_000  # the provider's clock may be behind the gateway's
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
NEVER_RAN = frozenset({"canceled", "expired"})


class RequestCounts(msgspec.Struct):
    processing: int = 0
    succeeded: int = 0
    errored: int = 0
    canceled: int = 0
    expired: int = 0

    @property
    def total(self) -> int:
        return self.processing + self.succeeded + self.errored + self.canceled + self.expired


class MessageBatch(msgspec.Struct):
    """The fields of a Message Batch the gateway reads."""

    id: str
    processing_status: str
    created_at: str = ""  # RFC 3339
    request_counts: RequestCounts = msgspec.field(default_factory=RequestCounts)
    results_url: str | None = None


class BatchPage(msgspec.Struct):
    data: list[MessageBatch]
    has_more: bool = False
    last_id: str | None = None


class LineResult(msgspec.Struct):
    type: str
    message: Any = None
    error: Any = None


class ResultLine(msgspec.Struct):
    custom_id: str
    result: LineResult


def _messages_reply(message: dict) -> ChatReply:
    """A Messages answer as the native path reads it: as it is, with its usage."""
    return ChatReply(message, wire.usage_of(message.get("usage")))


# Each batchable route: what one line's params are (as the single path sends them) and how its answer is read.
ROUTES: MappingProxyType[str, tuple[Callable[[ChatCall, bool], dict], Callable[[dict], ChatReply]]] = \
    MappingProxyType({
        "/v1/messages": (messages_request, _messages_reply),
        "/v1/chat/completions": (chat_request, chat_reply),
    })


def params_of(route: str, line: BatchLine) -> dict:
    """What `line` asks of Anthropic: the Messages request the single route sends, never streamed."""
    params = ROUTES[route][0](ChatCall(line.custom_id, line.upstream_model, line.body), False)
    params.pop("stream", None)
    return params


async def requests_body(lines: AsyncIterator[BatchLine], route: str) -> AsyncIterator[bytes]:
    """`{"requests": [...]}`, one request at a time as the lines are read."""
    yield b'{"requests":['
    separator = b""
    async for line in lines:
        yield separator + encode({"custom_id": line.custom_id, "params": params_of(route, line)})
        separator = b","
    yield b"]}"


def result_of(route: str, record: dict) -> BatchResult:
    """One results line as a result; a line naming no custom_id is UpstreamError 502 (nothing can
    be told of it), a malformed answer an errored line with status 502."""
    line = shapes.conforming(PROVIDER, record, ResultLine, "batch result line")
    kind = line.result.type
    if kind == "succeeded":
        return _answered(route, line.custom_id, line.result.message)
    if kind in NEVER_RAN:
        return BatchResult(custom_id=line.custom_id, status=0, outcome=kind)
    status, message = _error(line.result.error) if kind == "errored" else (502, f"unknown result type {kind!r}")
    return BatchResult(custom_id=line.custom_id, status=status, outcome="errored", message=cut(message))


def _answered(route: str, custom_id: str, message: object) -> BatchResult:
    try:
        if not isinstance(message, dict):
            raise UpstreamError(502, f"{PROVIDER} sent a batch answer that is not a JSON object")
        return BatchResult(custom_id=custom_id, reply=ROUTES[route][1](wire.checked_message(message)))
    except UpstreamError as exc:
        return BatchResult(custom_id=custom_id, status=exc.status, outcome="errored", message=cut(exc.message))


def _error(reported: object) -> tuple[int, str]:
    """The status Anthropic pairs with an errored line's error type, and its message. The error
    is an error response (`{"type": "error", "error": {...}}`) or, leniently, the inner object."""
    error: dict = reported if isinstance(reported, dict) else {}
    if isinstance(error.get("error"), dict):
        error = error["error"]
    kind = str(error.get("type") or "error")
    return wire.ERROR_STATUS.get(kind, 502), f"{kind}: {error.get('message') or 'no message'}"


def created_us(batch: MessageBatch) -> int:
    """When a batch was created, in UTC microseconds; UpstreamError 502 when it says no time."""
    try:
        created = datetime.fromisoformat(batch.created_at)
    except ValueError:
        raise UpstreamError(502, f"{PROVIDER} sent a message batch created at {batch.created_at[:40]!r}") from None
    if created.tzinfo is None:
        created = created.replace(tzinfo=UTC)
    return (created - EPOCH) // timedelta(microseconds=1)


def upstream_batch(batch: MessageBatch) -> UpstreamBatch:
    return UpstreamBatch(batch.id, batch.processing_status == "ended", batch.processing_status)


class AnthropicBatches:
    """The Message Batches of an Anthropic adapter: its base URL and headers (`x-api-key`, an
    org's own key, else the configured one; `anthropic-version`)."""

    def __init__(self, provider: AnthropicProvider, config: ProviderConfig, upstream: Upstream) -> None:
        self.provider, self.id = provider, provider.id
        self._url = config.base_url.rstrip("/") + "/v1/messages/batches"
        self._upstream = upstream.for_provider(config)
        self._timeout = timeout_for(config)

    @staticmethod
    def batchable(route: str) -> bool:
        return route in ROUTES

    async def submit(self, lines: AsyncIterator[BatchLine], *, route: str, batch_id: str, api_key: str = "") -> str:
        """Create the batch, its body sent as the lines are read (`batch_id`: Anthropic keeps no mark)."""
        if not self.batchable(route):
            raise ValueError(f"{route} has no batch endpoint at {self.id}")
        response = await uploaded(lambda body: post(self._upstream, self.id, self._url, body,
                                                     self.provider.headers(api_key), self._timeout),
                                  requests_body(lines, route))
        return shapes.conforming(self.id, await read_json(self.id, response), MessageBatch, "message batch").id

    async def find(self, batch_id: str, *, since_us: int, lines: int, taken: frozenset[str],
                   api_key: str = "") -> str | None:
        """The earliest batch created since `since_us` (less SLACK_US) holding `lines` requests
        and not `taken`: the one a submission begun at `since_us` created, if it did."""
        found = None
        async for batch in self._listed(since_us - SLACK_US, api_key):  # newest first
            if batch.request_counts.total == lines and batch.id not in taken:
                found = batch.id
        return found

    async def poll(self, upstream_id: str, api_key: str = "") -> UpstreamBatch:
        return upstream_batch(await self._batch(upstream_id, api_key))

    async def results(self, upstream_id: str, *, route: str, api_key: str = "") -> AsyncIterator[BatchResult]:
        """The results file's lines, read from where the batch says it is."""
        batch = await self._batch(upstream_id, api_key)
        url = batch.results_url or f"{self._batch_url(upstream_id)}/results"
        async for record in records(self.id, await self._get(url, api_key)):
            yield result_of(route, record)

    async def cancel(self, upstream_id: str, api_key: str = "") -> None:
        response = await post(self._upstream, self.id, f"{self._batch_url(upstream_id)}/cancel", b"",
                              self.provider.headers(api_key), self._timeout)
        response.release()

    async def _listed(self, since_us: int, api_key: str) -> AsyncIterator[MessageBatch]:
        """Batches newest first, page by page, until one created before `since_us`."""
        params = {"limit": PAGE}
        while True:
            page = shapes.conforming(self.id, await read_json(self.id, await self._get(self._url, api_key, params)),
                                     BatchPage, "message batch list")
            for batch in page.data:
                if created_us(batch) < since_us:
                    return
                yield batch
            if not page.has_more or not page.data:
                return
            params = {"limit": PAGE, "after_id": page.last_id or page.data[-1].id}

    async def _batch(self, upstream_id: str, api_key: str) -> MessageBatch:
        response = await self._get(self._batch_url(upstream_id), api_key)
        return shapes.conforming(self.id, await read_json(self.id, response), MessageBatch, "message batch")

    def _batch_url(self, upstream_id: str) -> str:
        return f"{self._url}/{quote(upstream_id, safe='')}"

    async def _get(self, url: str, api_key: str, params: dict[str, str] | None = None) -> aiohttp.ClientResponse:
        return await get(self._upstream, self.id, url, self.provider.headers(api_key), self._timeout, params)
