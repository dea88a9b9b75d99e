"""The Files API's routes (any key of the org; OpenAI's shapes): POST/GET /v1/files,
GET/DELETE /v1/files/{file_id}, GET /v1/files/{file_id}/content. Each handler parses, calls one
function of gateway.batches.files, and renders; an org sees only its own files."""

import contextlib
from collections.abc import AsyncIterator, Mapping

import aiohttp
import structlog
from aiohttp import hdrs, web

from gateway.batches import files
from gateway.edge.bodies import NO_STORE, json_response
from gateway.edge.errors import bad_request
from gateway.edge.parsing import WholeNumber
from gateway.edge.routes import Endpoint, Param
from gateway.edge.state import CALLER, SERVICES
from storage.errors import StorageError

PATH = "/v1/files"
ONE = PATH + "/{file_id}"
FORM_OVERHEAD_BYTES = 256 * 1024  # the fields and part headers around the file
LIMIT = WholeNumber("limit", 1, 10_000, 10_000, "files to list")
ORDERS = ("asc", "desc")
TEXT = {"type": "string"}
log = structlog.get_logger("gateway.batches.files")


def _declared_too_large(request: web.BaseRequest) -> bool:
    return request.content_length is not None and request.content_length > (
        files.MAX_UPLOAD_BYTES + FORM_OVERHEAD_BYTES)


async def expect_continue(request: web.Request) -> None:
    """`Expect: 100-continue` (curl's large uploads): the body is invited only when its declared
    length is acceptable; otherwise the handler answers 413 before it is sent."""
    invited = request.headers.get(hdrs.EXPECT, "").lower() == "100-continue" \
        and request.version == aiohttp.HttpVersion11
    if invited and not _declared_too_large(request):
        await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        request.writer.output_size = 0  # as aiohttp's own handler: the response has not begun


async def _form(request: web.Request) -> aiohttp.MultipartReader:
    if _declared_too_large(request):
        raise files.too_large()
    if request.content_type != "multipart/form-data":
        raise bad_request("send multipart/form-data with the parts `file` and `purpose`", files.FILE_FIELD)
    try:
        return await request.multipart()
    except (ValueError, KeyError, AssertionError) as exc:  # no or a malformed boundary
        raise bad_request(f"the multipart upload could not be read: {type(exc).__name__}", files.FILE_FIELD) from None


async def create_file(request: web.Request) -> web.Response:
    record = await files.upload(request.app[SERVICES], request[CALLER], await _form(request))
    return json_response(record.openai(), headers=NO_STORE)


def _newest_first(query: Mapping[str, str]) -> bool:
    """Newest first unless order=asc."""
    order = query.get("order", "desc")
    if order not in ORDERS:
        raise bad_request(f"order must be one of {list(ORDERS)}, got {order!r}", "order")
    return order == "desc"


async def list_files(request: web.Request) -> web.Response:
    query = request.query
    body = await files.listing(request.app[SERVICES], request[CALLER].org_id, purpose=query.get("purpose", ""),
                               limit=LIMIT.read(query), after=query.get("after", ""), newest_first=_newest_first(query))
    return json_response(body, headers=NO_STORE)


async def get_file(request: web.Request) -> web.Response:
    record = await files.owned_file(request.app[SERVICES], request[CALLER].org_id, request.match_info["file_id"])
    return json_response(record.openai(), headers=NO_STORE)


async def delete_file(request: web.Request) -> web.Response:
    body = await files.delete(request.app[SERVICES], request[CALLER].org_id, request.match_info["file_id"])
    return json_response(body, headers=NO_STORE)


async def file_content(request: web.Request) -> web.StreamResponse:
    """The bytes, streamed. The first chunk is read before the status line, so a store failing at
    once is still a JSON error; one failing later cuts the connection (a short body is never whole)."""
    services = request.app[SERVICES]
    record = await files.owned_file(services, request[CALLER].org_id, request.match_info["file_id"])
    chunks = files.read_file(services, record)
    response = web.StreamResponse(headers={hdrs.CONTENT_TYPE: files.CONTENT_TYPE, **NO_STORE})
    response.content_length = record.bytes
    async with contextlib.aclosing(chunks):
        try:
            first = b"" if request.method == hdrs.METH_HEAD else await anext(chunks, b"")
        except StorageError as exc:
            raise files.storage_failed(exc) from None
        await response.prepare(request)
        if request.method != hdrs.METH_HEAD:
            await _relay(request, response, first, chunks)
    return response


async def _relay(request: web.Request, response: web.StreamResponse, first: bytes,
                 chunks: AsyncIterator[bytes]) -> None:
    try:
        await response.write(first)
        async for chunk in chunks:
            await response.write(chunk)
    except StorageError as exc:
        log.error("file_content_cut", error=str(exc))
        if request.transport is not None:
            request.transport.close()
        return
    await response.write_eof()


def upload_form() -> dict:
    """The upload's multipart schema, for the OpenAPI document."""
    return {"type": "object", "required": [files.FILE_FIELD, "purpose"], "properties": {
        files.FILE_FIELD: {"type": "string", "contentMediaType": files.CONTENT_TYPE,
                           "maxLength": files.MAX_UPLOAD_BYTES},
        "purpose": {"enum": list(files.UPLOAD_PURPOSES)},
        "expires_after[anchor]": {"enum": ["created_at"]},
        "expires_after[seconds]": {"type": "integer", "minimum": files.EXPIRY_BOUNDS_S[0],
                                   "maximum": files.EXPIRY_BOUNDS_S[1]}}}


LIST_QUERY = (Param("purpose", description="only files of this purpose"), Param.whole(LIMIT),
              Param("after", description="a file id: list those after it"),
              Param("order", {"enum": list(ORDERS), "default": "desc"}, "by upload time"))
ENDPOINTS = (
    Endpoint("POST", PATH, create_file, "Upload a file (a batch's input, JSONL)", expect_handler=expect_continue,
             form=upload_form()),
    Endpoint("GET", PATH, list_files, "The organization's files", query=LIST_QUERY),
    Endpoint("GET", ONE, get_file, "A file"),
    Endpoint("DELETE", ONE, delete_file, "Delete a file"),
    Endpoint("GET", ONE + "/content", file_content, "A file's content, streamed",
             answers={"200": (files.CONTENT_TYPE,)}),
)
