"""OpenAI's Files API, as its batch API uses it; the bytes are kept in memory on the app.

    POST   /v1/files               multipart `file` and `purpose` -> the file object
    GET    /v1/files               ?purpose=&limit=&after=&order=desc|asc -> ``{"object": "list", "data",
                                   "first_id", "last_id", "has_more"}`` (newest first by default)
    GET    /v1/files/{id}          the file object
    GET    /v1/files/{id}/content  its bytes
    DELETE /v1/files/{id}          ``{"id", "object": "file", "deleted": true}``

A file object is OpenAI's: `id` (``file-...``), `object` "file", `bytes`, `created_at`, `filename`,
`purpose`, `status` "processed", `expires_at` (a batch's input and output files 30 days on, as
OpenAI keeps them by default; else null), `status_details` null. A batch's output and error files
(purpose "batch_output") are stored here by `simulator.openai_batches`, as chunks of lines.
An upload for purpose "batch" must be a ``.jsonl`` file, as OpenAI demands. The request's record
holds the purpose and, for the file, its name, size and SHA-256.
"""

import hashlib
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import msgspec
from aiohttp import BodyPartReader, web

from simulator.batch_control import page, query_limit, send_chunks
from simulator.openai_wire import error_body, error_response, json_response
from simulator.recording import RECORD_KEY

FILES_PATH = "/v1/files"
PURPOSES = ("assistants", "batch", "fine-tune", "vision", "user_data", "evals")
BATCH_FILE_DAYS = 30
EXPIRING = ("batch", "batch_output")
READ_CHUNK = 1 << 20


class StoredFile(msgspec.Struct):
    id: str
    filename: str
    purpose: str
    created_at: int
    chunks: list[bytes]

    @property
    def size(self) -> int:
        return sum(len(chunk) for chunk in self.chunks)

    @property
    def data(self) -> bytes:
        return b"".join(self.chunks)

    def body(self) -> dict[str, Any]:
        """The file object, as OpenAI shapes it."""
        expires = self.created_at + BATCH_FILE_DAYS * 86400 if self.purpose in EXPIRING else None
        return {"id": self.id, "object": "file", "bytes": self.size, "created_at": self.created_at,
                "filename": self.filename, "purpose": self.purpose, "status": "processed",
                "expires_at": expires, "status_details": None}


class Files:
    """The app's files, in upload order."""

    def __init__(self) -> None:
        self._files: dict[str, StoredFile] = {}

    def add(self, chunks: list[bytes], filename: str, purpose: str) -> StoredFile:
        stored = StoredFile(f"file-sim{uuid.uuid4().hex}", filename, purpose, int(time.time()), chunks)
        self._files[stored.id] = stored
        return stored

    def get(self, file_id: str) -> StoredFile | None:
        return self._files.get(file_id)

    def remove(self, file_id: str) -> bool:
        return self._files.pop(file_id, None) is not None

    def listed(self, purpose: str | None, newest_first: bool) -> list[StoredFile]:
        files = [f for f in self._files.values() if purpose is None or f.purpose == purpose]
        return files[::-1] if newest_first else files


FILES_KEY = web.AppKey("files", Files)


class BadUpload(ValueError):
    """An upload OpenAI would refuse with 400; the message says why."""


def not_found(file_id: str) -> web.Response:
    return web.json_response(error_body(404, f"No such File object: {file_id}", param="id"), status=404)


async def read_upload(request: web.Request) -> tuple[str, str, list[bytes]]:
    """The purpose, file name and bytes (in chunks) of the multipart upload; BadUpload."""
    if not request.content_type.startswith("multipart/"):
        raise BadUpload("The request must be multipart/form-data.")
    purpose, filename, chunks = "", "", None
    async for part in await request.multipart():
        if not isinstance(part, BodyPartReader):
            raise BadUpload("Nested multipart bodies are not supported.")
        if part.name == "file":
            filename, chunks = part.filename or "", [chunk async for chunk in _chunks(part)]
        elif part.name == "purpose":
            purpose = await part.text()
    request[RECORD_KEY].body = {"purpose": purpose, "file": None if chunks is None else _facts(filename, chunks)}
    if chunks is None:
        raise BadUpload("'file' is a required property")
    return purpose, filename, chunks


async def _chunks(part: BodyPartReader) -> AsyncIterator[bytes]:
    while chunk := await part.read_chunk(READ_CHUNK):
        yield chunk


def _facts(filename: str, chunks: list[bytes]) -> dict[str, Any]:
    digest = hashlib.sha256()
    for chunk in chunks:
        digest.update(chunk)
    return {"filename": filename, "bytes": sum(map(len, chunks)), "sha256": digest.hexdigest()}


def check_upload(purpose: str, filename: str) -> None:
    if purpose not in PURPOSES:
        raise BadUpload(f"'{purpose}' is not one of {list(PURPOSES)} - 'purpose'")
    if purpose == "batch" and not filename.endswith(".jsonl"):
        raise BadUpload("Invalid file format for Batch API. Must be .jsonl")


async def create_file(request: web.Request) -> web.Response:
    """POST /v1/files."""
    try:
        purpose, filename, chunks = await read_upload(request)
        check_upload(purpose, filename)
    except BadUpload as exc:
        return error_response(400, str(exc))
    return json_response(request.app[FILES_KEY].add(chunks, filename, purpose).body())


async def list_files(request: web.Request) -> web.Response:
    """GET /v1/files."""
    limit, order = query_limit(request, 10_000, 10_000), request.query.get("order", "desc")
    if limit is None or order not in ("asc", "desc"):
        return error_response(400, "Invalid 'limit' or 'order' query parameter.")
    files = request.app[FILES_KEY].listed(request.query.get("purpose"), order == "desc")
    shown, more = page(files, lambda f: f.id, request.query.get("after"), limit)
    return json_response(list_body([f.body() for f in shown], more))


def list_body(data: list[dict[str, Any]], has_more: bool) -> dict[str, Any]:
    """OpenAI's cursor page."""
    return {"object": "list", "data": data, "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None, "has_more": has_more}


async def retrieve_file(request: web.Request) -> web.Response:
    """GET /v1/files/{id}."""
    stored = request.app[FILES_KEY].get(request.match_info["file_id"])
    return not_found(request.match_info["file_id"]) if stored is None else json_response(stored.body())


async def file_content(request: web.Request) -> web.StreamResponse:
    """GET /v1/files/{id}/content: the bytes, sent chunk by chunk."""
    stored = request.app[FILES_KEY].get(request.match_info["file_id"])
    if stored is None:
        return not_found(request.match_info["file_id"])
    return await send_chunks(request, stored.chunks, "application/octet-stream")


async def delete_file(request: web.Request) -> web.Response:
    """DELETE /v1/files/{id}."""
    file_id = request.match_info["file_id"]
    if not request.app[FILES_KEY].remove(file_id):
        return not_found(file_id)
    return json_response({"id": file_id, "object": "file", "deleted": True})


def add_routes(app: web.Application) -> None:
    """Hang the file store on `app` and mount the Files routes."""
    app[FILES_KEY] = Files()
    app.router.add_post(FILES_PATH, create_file)
    app.router.add_get(FILES_PATH, list_files)
    app.router.add_get(FILES_PATH + "/{file_id}", retrieve_file)
    app.router.add_get(FILES_PATH + "/{file_id}/content", file_content)
    app.router.add_delete(FILES_PATH + "/{file_id}", delete_file)
