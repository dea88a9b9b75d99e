"""Kept files, OpenAI's Files API: batch inputs an org uploads, and the output and error files its
batches produce. The bytes live in the FileStore (Services.files: the bucket's files/, else a local
directory); the ledger records each file once kept (FileStored) and once its bytes are gone
(FileDeleted). Every function here is plain, for the routes (gateway.batches.file_routes) and the
batch engine alike. A file is streamed, to a temp file and on to the store, never held whole.
"""

import asyncio
import contextlib
import hashlib
import os
import secrets
import tempfile
from collections.abc import AsyncGenerator, AsyncIterator
from typing import BinaryIO

import msgspec
from aiohttp import BodyPartReader, MultipartReader, web
from aiohttp.http_exceptions import HttpProcessingError

from gateway.edge.errors import ApiError, bad_request
from gateway.edge.parsing import NOT_TEXT, whole_number
from gateway.services import Caller, Services
from ledger import batch_queries, file_queries
from ledger.events import FileDeleted, FileStored
from ledger.file_queries import FileRow
from ledger.recorder import Append, AppendRejected
from storage.errors import StorageError

MAX_UPLOAD_BYTES = 200 * 1024 * 1024  # OpenAI's limit for a batch's input file
MAX_BATCH_LINES = 50_000  # requests one batch input may hold (OpenAI's limit)
EXPIRY_BOUNDS_S = (3600, 2_592_000)  # expires_after[seconds]: one hour to 30 days, as OpenAI allows
UPLOAD_PURPOSES = ("batch",)
MAX_FIELD_BYTES = 4096
MAX_FIELDS = 16
MAX_FILENAME = 1024
FILE_FIELD = "file"
CONTENT_TYPE = "application/jsonl"
WRITE_BYTES = 1024 * 1024  # what the temp file is written in (a thread hop each)
US = 1_000_000
# What reading a client's form raises when it is malformed or cut short.
UNREADABLE = (ConnectionError, ValueError, HttpProcessingError, web.RequestPayloadError)


class FileRecord(msgspec.Struct, frozen=True):
    """A kept file as the ledger knows it. `expired`: the sweeper deleted it at its expiry."""

    file_id: str
    org_id: str
    purpose: str
    filename: str
    bytes: int
    lines: int
    created_at_us: int
    expires_at_us: int
    storage: str
    object_key: str
    key_id: str
    deleted_at_us: int | None
    expired: bool

    @classmethod
    def of(cls, row: FileRow) -> "FileRecord":
        return cls(row.file_id, row.org_id, row.purpose, row.filename, row.bytes, row.lines, row.created_at_us,
                   row.expires_at_us, row.storage, row.object_key, row.key_id, row.deleted_at_us, row.expired)

    def openai(self) -> dict:
        """OpenAI's file object."""
        return {"id": self.file_id, "object": "file", "bytes": self.bytes, "created_at": self.created_at_us // US,
                "filename": self.filename, "purpose": self.purpose, "status": "processed",
                "expires_at": self.expires_at_us // US, "status_details": None}

    def gone(self, now_us: int) -> str | None:
        """Why its bytes can no longer be read, or None while they can."""
        if self.deleted_at_us is not None:
            return "it expired and was deleted" if self.expired else "it was deleted"
        return "it expired" if self.expires_at_us <= now_us else None


class Spooled(msgspec.Struct, frozen=True):
    """A finished temp file: its path, size, SHA-256 (hex) and JSONL lines."""

    path: str
    bytes: int
    sha256: str
    lines: int


class LineCounter:
    """Lines holding more than whitespace, counted across chunks without keeping any line."""

    def __init__(self) -> None:
        self.lines, self._open = 0, False  # _open: the line under way has content

    def feed(self, chunk: bytes) -> None:
        *ended, tail = chunk.split(b"\n")
        for part in ended:
            self.lines += self._open or bool(part.strip())
            self._open = False
        self._open = self._open or bool(tail.strip())

    def finish(self) -> int:
        self.lines += self._open
        self._open = False
        return self.lines


def no_such_file(file_id: str) -> ApiError:
    return ApiError(404, f"no file with id {file_id!r}", type="invalid_request_error", code="not_found")


def too_large() -> ApiError:
    return ApiError(413, f"the file is larger than {MAX_UPLOAD_BYTES} bytes (200 MB), the most a batch input"
                         " may be", type="request_too_large", param=FILE_FIELD)


def storage_failed(exc: StorageError) -> ApiError:
    return ApiError(502, f"file storage failed: {exc}", type="storage_error")


def now_us(services: Services) -> int:
    return services.recorder.clock()


# -- reading -------------------------------------------------------------------------------------

async def stored_file(services: Services, org_id: str, file_id: str) -> FileRecord | None:
    """The org's file (deleted or not); None for an unknown id or another org's file."""
    row = await file_queries.file(services.recorder, org_id, file_id)
    return None if row is None else FileRecord.of(row)


async def owned_file(services: Services, org_id: str, file_id: str) -> FileRecord:
    """The org's file; 404 for an unknown id or another org's file."""
    if (record := await stored_file(services, org_id, file_id)) is None:
        raise no_such_file(file_id)
    return record


def read_file(services: Services, record: FileRecord) -> AsyncGenerator[bytes, None]:
    """The file's bytes, in chunks as they are read (StorageError at the first if the store
    fails); 410 at once when the file was deleted or has expired."""
    if (why := record.gone(now_us(services))) is not None:
        raise ApiError(410, f"the content of file {record.file_id!r} is no longer available: {why}",
                       type="invalid_request_error", code="file_gone")
    _check_storage(services, record)
    return services.files.stream(record.object_key)


def _check_storage(services: Services, record: FileRecord) -> None:
    if record.storage != services.files.kind:  # [storage] changed since it was kept
        raise ApiError(503, f"file {record.file_id!r} is kept in {record.storage} storage, which this gateway"
                            f" is not configured to use", type="service_unavailable")


async def listing(services: Services, org_id: str, *, purpose: str = "", limit: int = 10_000, after: str = "",
                  newest_first: bool = True) -> dict:
    """OpenAI's list of the org's files neither deleted nor expired, `limit` after file `after`."""
    position = None
    if after:
        if (anchor := await file_queries.file(services.recorder, org_id, after)) is None:
            raise bad_request(f"after names no file of yours: {after!r}", "after")
        position = anchor.position
    rows = await file_queries.page(services.recorder, org_id, now_us(services), purpose=purpose,
                                   after_position=position, limit=limit + 1, newest_first=newest_first)
    data = [FileRecord.of(row).openai() for row in rows[:limit]]
    return {"object": "list", "data": data, "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None, "has_more": len(rows) > limit}


# -- deleting ------------------------------------------------------------------------------------

async def delete(services: Services, org_id: str, file_id: str) -> dict:
    """Delete the org's file: its bytes first, then FileDeleted (a retry after a failure finds the
    bytes already gone, which is fine). 404 when unknown, another org's, or already deleted."""
    record = await owned_file(services, org_id, file_id)
    if record.deleted_at_us is not None:
        raise ApiError(404, f"file {file_id!r} was already deleted", code="not_found")
    if running := await batch_queries.reading(services.recorder, org_id, file_id):
        raise ApiError(409, f"file {file_id!r} is the input of batch {running}, which is still running; cancel it"
                            " or wait for it to end", type="invalid_request_error", code="file_in_use")
    _check_storage(services, record)
    try:
        await services.files.delete(record.object_key)
    except StorageError as exc:
        raise storage_failed(exc) from None
    with contextlib.suppress(AppendRejected):  # a racing delete recorded it first: deleted all the same
        await services.writer.append(Append(org_id, [FileDeleted(file_id=file_id)]))
    return {"id": file_id, "object": "file", "deleted": True}


# -- writing -------------------------------------------------------------------------------------

async def write_file(services: Services, org_id: str, key_id: str, *, purpose: str, filename: str,
                     chunks: AsyncIterator[bytes], lines: int = 0, expires_after_s: int | None = None) -> FileRecord:
    """Keep `chunks` as a file of the org: spooled to a temp file (hashed, counted), put in the
    FileStore, then recorded (FileStored, expiring `expires_after_s` from now, else after
    `[batches] file_retention_days`). Durable on return. `lines` 0: counted here."""
    spooled = await spool(chunks)
    try:
        return await keep(services, org_id, key_id, spooled, purpose=purpose, filename=filename,
                          lines=lines or spooled.lines, expires_after_s=expires_after_s)
    finally:
        await asyncio.to_thread(_remove, spooled.path)


async def spool(chunks: AsyncIterator[bytes], *, max_bytes: int | None = None,
                max_lines: int | None = None) -> Spooled:
    """`chunks` in a temp file, flushed to disk; 413 past `max_bytes`, 400 past `max_lines` (the
    temp file removed then, and whenever this fails)."""
    fd, path = tempfile.mkstemp(prefix="gateway-file-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            digest, counter, size = await _write_all(chunks, out, max_bytes, max_lines)
            await asyncio.to_thread(_flush, out)
    except BaseException:
        await asyncio.shield(asyncio.to_thread(_remove, path))
        raise
    return Spooled(path, size, digest.hexdigest(), counter.finish())


async def _write_all(chunks: AsyncIterator[bytes], out: BinaryIO, max_bytes: int | None,
                     max_lines: int | None) -> tuple["hashlib._Hash", LineCounter, int]:
    digest, counter, size, pending = hashlib.sha256(), LineCounter(), 0, bytearray()
    async for chunk in chunks:
        size += len(chunk)
        if max_bytes is not None and size > max_bytes:
            raise too_large()
        digest.update(chunk)
        counter.feed(chunk)
        if max_lines is not None and counter.lines > max_lines:
            raise bad_request(f"a batch input holds at most {max_lines} lines (requests)", FILE_FIELD)
        pending += chunk
        if len(pending) >= WRITE_BYTES:
            await asyncio.to_thread(out.write, pending)
            pending = bytearray()
    await asyncio.to_thread(out.write, pending)
    if max_lines is not None and counter.finish() > max_lines:
        raise bad_request(f"a batch input holds at most {max_lines} lines (requests)", FILE_FIELD)
    return digest, counter, size


def _flush(out: BinaryIO) -> None:
    out.flush()
    os.fsync(out.fileno())


def _remove(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


async def keep(services: Services, org_id: str, key_id: str, spooled: Spooled, *, purpose: str, filename: str,
               lines: int, expires_after_s: int | None = None) -> FileRecord:
    """Put a spooled file in the store, then record it (FileStored); durable on return."""
    file_id = "file-" + secrets.token_hex(12)
    object_key = f"{org_id}/{file_id}"
    seconds = expires_after_s or services.config.batches.file_retention_days * 86_400
    try:
        await services.files.put(object_key, spooled.path, CONTENT_TYPE)
    except StorageError as exc:
        raise storage_failed(exc) from None
    event = FileStored(file_id=file_id, purpose=purpose, filename=filename, bytes=spooled.bytes,
                       sha256=spooled.sha256, object_key=object_key, storage=services.files.kind,
                       expires_at_us=now_us(services) + seconds * US, lines=lines, key_id=key_id)
    # A failed append leaves the bytes unrecorded, not deleted: its commit may still have happened.
    [recorded] = await services.writer.append(Append(org_id, [event]))
    return FileRecord(file_id, org_id, purpose, filename, spooled.bytes, lines, recorded.recorded_at_us,
                      event.expires_at_us, event.storage, object_key, key_id, None, False)


# -- uploading (POST /v1/files) ------------------------------------------------------------------

class UploadForm(msgspec.Struct, kw_only=True):
    """The form's fields as read, and its file once spooled."""

    fields: dict[str, str] = {}
    filename: str = ""
    spooled: Spooled | None = None


async def upload(services: Services, caller: Caller, form_reader: MultipartReader) -> FileRecord:
    """A multipart upload (`file`, `purpose`, optional `expires_after[anchor]`/`[seconds]`), its
    file spooled to disk as it arrives, checked (200 MB, 50,000 lines, not empty), then kept."""
    form = UploadForm()
    try:
        await _read_form(form_reader, form)
        purpose, seconds = _purpose(form.fields), _expiry(form.fields)
        spooled = _nonempty(form.spooled)
        return await keep(services, caller.org_id, caller.principal.key_id, spooled, purpose=purpose,
                          filename=form.filename, lines=spooled.lines, expires_after_s=seconds)
    finally:
        if form.spooled is not None:
            await asyncio.to_thread(_remove, form.spooled.path)


async def _read_form(reader: MultipartReader, form: UploadForm) -> None:
    """Each part in turn: fields checked as they come (a bad purpose is refused before the file)."""
    try:
        while (part := await reader.next()) is not None:
            if not isinstance(part, BodyPartReader):
                raise bad_request("nested multipart parts are not supported", FILE_FIELD)
            await _read_part(part, form)
    except UNREADABLE as exc:
        raise bad_request(f"the multipart upload could not be read: {type(exc).__name__}", FILE_FIELD) from None


async def _read_part(part: BodyPartReader, form: UploadForm) -> None:
    name = part.name or ""
    if name == FILE_FIELD:
        if form.spooled is not None:
            raise bad_request("the form holds more than one file", FILE_FIELD)
        form.filename = _filename(part.filename or "upload.jsonl")
        form.spooled = await spool(_part_chunks(part), max_bytes=MAX_UPLOAD_BYTES, max_lines=MAX_BATCH_LINES)
        return
    if len(form.fields) >= MAX_FIELDS:
        raise bad_request(f"the form holds more than {MAX_FIELDS} fields", name)
    form.fields[name] = await _field(part, name)
    if name == "purpose":
        _purpose(form.fields)
    elif name.startswith("expires_after"):
        _expiry(form.fields, complete=False)


async def _part_chunks(part: BodyPartReader) -> AsyncIterator[bytes]:
    while chunk := await part.read_chunk(256 * 1024):
        yield chunk


async def _field(part: BodyPartReader, name: str) -> str:
    data = bytearray()
    while chunk := await part.read_chunk(MAX_FIELD_BYTES):
        data += chunk
        if len(data) > MAX_FIELD_BYTES:
            raise bad_request(f"form field {name!r} is longer than {MAX_FIELD_BYTES} bytes", name)
    try:
        text = data.decode()
    except UnicodeDecodeError:
        raise bad_request(f"form field {name!r} is not UTF-8 text", name) from None
    if NOT_TEXT.search(text):
        raise bad_request(f"form field {name!r} holds a NUL", name)
    return text


def _filename(name: str) -> str:
    if NOT_TEXT.search(name) or not name.isprintable() or len(name) > MAX_FILENAME:
        raise bad_request(f"the file's name must be printable text of at most {MAX_FILENAME} characters",
                          FILE_FIELD)
    return name


def _purpose(fields: dict[str, str]) -> str:
    purpose = fields.get("purpose")
    if purpose is None:
        raise bad_request("purpose is required: send purpose=batch", "purpose")
    if purpose not in UPLOAD_PURPOSES:
        raise bad_request(f"purpose must be one of {list(UPLOAD_PURPOSES)}, got {purpose!r}", "purpose")
    return purpose


def _expiry(fields: dict[str, str], *, complete: bool = True) -> int | None:
    """expires_after[seconds] (anchored at created_at, the only anchor); None when not sent."""
    anchor, seconds = fields.get("expires_after[anchor]"), fields.get("expires_after[seconds]")
    if anchor is not None and anchor != "created_at":
        raise bad_request(f"expires_after[anchor] must be 'created_at', got {anchor!r}", "expires_after[anchor]")
    if seconds is None:
        if complete and anchor is not None:
            raise bad_request("expires_after[seconds] is required with expires_after[anchor]",
                              "expires_after[seconds]")
        return None
    return whole_number(seconds, "expires_after[seconds]", *EXPIRY_BOUNDS_S)


def _nonempty(spooled: Spooled | None) -> Spooled:
    if spooled is None:
        raise bad_request("the form holds no file: send it as the part `file`", FILE_FIELD)
    if spooled.bytes == 0 or spooled.lines == 0:
        raise bad_request("the file is empty", FILE_FIELD)
    return spooled
