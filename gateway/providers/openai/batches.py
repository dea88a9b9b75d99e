"""OpenAI's Batch API (Files + Batches) as a BatchProvider: lines uploaded as one JSON Lines file
(`purpose=batch`) while they are read, a batch created on it and marked with the gateway's batch
id (`metadata.gateway_batch_id`, how `find` knows it again), polled, and its output and error
files read back line by line, each line's answer checked and its usage read as the single
route reads one (`adapter`, `responses`)."""

from collections.abc import AsyncIterator, Callable
from types import MappingProxyType
from typing import Any
from urllib.parse import quote

import aiohttp
import msgspec

from gateway.config import ProviderConfig
from gateway.edge.errors import UpstreamError
from gateway.jsonio import encode
from gateway.providers import shapes
from gateway.providers.base import BatchLine, BatchResult, ChatCall, ChatReply, EmbeddingCall, FilePart, \
    FormField, UpstreamBatch
from gateway.providers.http import Upstream, get, read_json, timeout_for
from gateway.providers.openai import responses
from gateway.providers.openai.adapter import OpenAIProvider, chat_reply, embedding_reply, embedding_request, \
    request_body, text_reply
from gateway.providers.openai.jsonl import cut, records, uploaded
from gateway.providers.openai.multipart import encode_form, new_boundary
from gateway.providers.usage import Usage

PROVIDER = "openai"
WINDOW = "24h"  # the only completion window OpenAI offers
ENDED = frozenset({"completed", "failed", "expired", "cancelled"})  # results are final: read them
NEVER_RAN = MappingProxyType({"batch_expired": "expired", "batch_cancelled": "canceled"})  # error code -> outcome
PAGE = "100"  # batches listed per request, OpenAI's most
SLACK_US = 5_000_000  # the provider's clock may be behind the gateway's


class OpenAIBatch(msgspec.Struct):
    """The fields of a batch object the gateway reads."""

    id: str
    status: str
    created_at: int = 0  # seconds
    metadata: dict[str, Any] | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None


class BatchPage(msgspec.Struct):
    data: list[OpenAIBatch]
    has_more: bool = False


class LineResponse(msgspec.Struct):
    status_code: int
    body: Any = None


class ResultLine(msgspec.Struct):
    """One line of an output or error file."""

    custom_id: str
    response: LineResponse | None = None
    error: dict[str, Any] | None = None


def _chat_body(call: ChatCall) -> dict:
    return request_body(call, False)


def _embeddings_body(call: ChatCall) -> dict:
    return embedding_request(EmbeddingCall(call.request_id, call.upstream_model, call.body))


def _embeddings_reply(provider: str, body: dict) -> ChatReply:
    """The provider's list object, billed on its prompt tokens as the embeddings route bills them."""
    return ChatReply(body, Usage(embedding_reply(body).prompt_tokens))


def _responses_reply(provider: str, body: dict) -> ChatReply:
    return responses.response_reply(body)


# Each batchable route: what one line sends (as the single adapter sends it) and how its answer is read.
ROUTES: MappingProxyType[str, tuple[Callable[[ChatCall], dict], Callable[[str, dict], ChatReply]]] = \
    MappingProxyType({
        "/v1/chat/completions": (_chat_body, chat_reply),
        "/v1/completions": (_chat_body, text_reply),
        "/v1/embeddings": (_embeddings_body, _embeddings_reply),
        "/v1/responses": (lambda call: responses.request_body(call, False), _responses_reply),
    })


def line_body(route: str, line: BatchLine) -> dict:
    """What `line` asks of the provider: its body as the single route sends it, never streamed."""
    body = ROUTES[route][0](ChatCall(line.custom_id, line.upstream_model, line.body))
    body.pop("stream", None)
    return body


def input_line(route: str, line: BatchLine) -> bytes:
    """One line of the uploaded file."""
    return encode({"custom_id": line.custom_id, "method": "POST", "url": route, "body": line_body(route, line)}) + b"\n"


def result_of(route: str, record: dict) -> BatchResult:
    """One output or error file line as a result; a line naming no custom_id is UpstreamError 502
    (nothing can be told of it), a malformed answer an errored line with status 502."""
    line = shapes.conforming(PROVIDER, record, ResultLine, "batch result line")
    if line.response is not None and line.response.status_code == 200:
        return _answered(route, line.custom_id, line.response.body)
    error = line.error or {}
    if (outcome := NEVER_RAN.get(str(error.get("code")))) is not None:
        return BatchResult(custom_id=line.custom_id, status=0, outcome=outcome, message=cut(error.get("message")))
    status = line.response.status_code if line.response is not None else 502
    return BatchResult(custom_id=line.custom_id, status=status, outcome="errored", message=_message(line))


def _answered(route: str, custom_id: str, body: object) -> BatchResult:
    try:
        if not isinstance(body, dict):
            raise UpstreamError(502, f"{PROVIDER} sent a batch answer that is not a JSON object")
        return BatchResult(custom_id=custom_id, reply=ROUTES[route][1](PROVIDER, body))
    except UpstreamError as exc:
        return BatchResult(custom_id=custom_id, status=exc.status, outcome="errored", message=cut(exc.message))


def _message(line: ResultLine) -> str:
    """The provider's words for a line that failed: its answer's error, else the line's."""
    body = line.response.body if line.response is not None else None
    error = body.get("error") if isinstance(body, dict) else None
    error = error if isinstance(error, dict) else line.error or {}
    return cut(error.get("message"))


def upstream_batch(batch: OpenAIBatch) -> UpstreamBatch:
    return UpstreamBatch(batch.id, batch.status in ENDED, batch.status)


class OpenAIBatches:
    """The Batch API of an OpenAI adapter: its base URL and keys (an org's own, else the configured one)."""

    def __init__(self, provider: OpenAIProvider, config: ProviderConfig, upstream: Upstream) -> None:
        self.provider, self.id = provider, provider.id
        self._upstream = upstream.for_provider(config)
        self._timeout = timeout_for(config)

    @staticmethod
    def batchable(route: str) -> bool:
        return route in ROUTES

    async def submit(self, lines: AsyncIterator[BatchLine], *, route: str, batch_id: str, api_key: str = "") -> str:
        """Upload the lines as they are read, then create the batch on that file, marked with `batch_id`."""
        if not self.batchable(route):
            raise ValueError(f"{route} has no batch endpoint at {self.id}")
        file_id = await self._upload(lines, route, batch_id, api_key)
        body = {"input_file_id": file_id, "endpoint": route, "completion_window": WINDOW,
                "metadata": {"gateway_batch_id": batch_id}}
        created = await read_json(self.id, await self.provider.send_json("/batches", body, api_key))
        return shapes.conforming(self.id, created, OpenAIBatch, "batch").id

    async def find(self, batch_id: str, *, since_us: int, lines: int, taken: frozenset[str],
                   api_key: str = "") -> str | None:
        """The batch marked with `batch_id`, listed newest first back to `since_us`."""
        async for batch in self._listed(since_us - SLACK_US, api_key):
            if (batch.metadata or {}).get("gateway_batch_id") == batch_id and batch.id not in taken:
                return batch.id
        return None

    async def poll(self, upstream_id: str, api_key: str = "") -> UpstreamBatch:
        return upstream_batch(await self._batch(upstream_id, api_key))

    async def results(self, upstream_id: str, *, route: str, api_key: str = "") -> AsyncIterator[BatchResult]:
        """The output file's lines, then the error file's (a file the batch has not got is skipped)."""
        batch = await self._batch(upstream_id, api_key)
        for file_id in (batch.output_file_id, batch.error_file_id):
            if file_id:
                response = await self._get(f"/files/{quote(file_id, safe='')}/content", api_key)
                async for record in records(self.id, response):
                    yield result_of(route, record)

    async def cancel(self, upstream_id: str, api_key: str = "") -> None:
        response = await self.provider.send(f"/batches/{quote(upstream_id, safe='')}/cancel", "", b"", api_key)
        response.release()

    async def _upload(self, lines: AsyncIterator[BatchLine], route: str, batch_id: str, api_key: str) -> str:
        """The id of the input file, uploaded while `lines` are read, never whole."""
        boundary = new_boundary()
        form = encode_form(self._form(lines, route, batch_id), boundary)
        response = await uploaded(lambda body: self.provider.send(
            "/files", "", body, api_key, f"multipart/form-data; boundary={boundary}"), form)
        uploaded_file = await read_json(self.id, response)
        if not isinstance(file_id := uploaded_file.get("id"), str) or not file_id:
            raise UpstreamError(502, f"{self.id} sent a file object without an id")
        return file_id

    @staticmethod
    async def _form(lines: AsyncIterator[BatchLine], route: str, batch_id: str) -> AsyncIterator[FormField | FilePart]:
        yield FormField("purpose", "batch")
        yield FilePart(f"{batch_id}.jsonl", "application/jsonl", (input_line(route, line) async for line in lines))

    async def _listed(self, since_us: int, api_key: str) -> AsyncIterator[OpenAIBatch]:
        """Batches newest first, page by page, until one created before `since_us`."""
        params = {"limit": PAGE}
        while True:
            page = shapes.conforming(self.id, await read_json(self.id, await self._get("/batches", api_key, params)),
                                     BatchPage, "batch list")
            for batch in page.data:
                if batch.created_at * 1_000_000 < since_us:
                    return
                yield batch
            if not page.has_more or not page.data:
                return
            params = {"limit": PAGE, "after": page.data[-1].id}

    async def _batch(self, upstream_id: str, api_key: str) -> OpenAIBatch:
        response = await self._get(f"/batches/{quote(upstream_id, safe='')}", api_key)
        return shapes.conforming(self.id, await read_json(self.id, response), OpenAIBatch, "batch")

    async def _get(self, path: str, api_key: str, params: dict[str, str] | None = None) -> aiohttp.ClientResponse:
        headers = await self.provider.request_headers(api_key)
        return await get(self._upstream, self.id, self.provider.url(path, ""), headers, self._timeout, params)
