"""A client's multipart upload, passed on as it arrives (encoded for upstream by
gateway.providers.openai.multipart).

The text fields are read up to the file part. When the model was among them the file is
streamed straight on to the provider and the fields after it follow it; when the file
comes first it is spooled (in memory while small, on disk beyond SPOOL_MEMORY_BYTES) so
the model is known before anything is sent. Either way the file is never held whole in
memory, its bytes are counted as they pass, and past MAX_FILE_BYTES the upload is refused
with 413.
"""

import tempfile
from collections.abc import AsyncIterator, Callable

import aiohttp
from aiohttp import BodyPartReader, MultipartReader, web
from aiohttp.http_exceptions import HttpProcessingError

from gateway.edge.body_budget import BodyHold
from gateway.edge.parsing import printable
from gateway.edge.errors import ApiError, bad_request
from gateway.providers.base import FilePart, FormField
from gateway.providers.openai.multipart import FILE_FIELD
from gateway.edge.state import BODY_HOLD

MAX_FILE_BYTES = 25 * 1024 * 1024  # OpenAI's limit for an audio file
FORM_OVERHEAD_BYTES = 256 * 1024  # the text fields and part headers around the file
MAX_FIELD_BYTES = 64 * 1024
CHUNK_BYTES = 64 * 1024
SPOOL_MEMORY_BYTES = 1024 * 1024

FieldCheck = Callable[[str, str], str]  # validates a field; returns the value to send upstream
# What reading a client's form raises when the form is malformed or cut short: a part header
# aiohttp cannot parse, a body that ends before its closing boundary or its declared length.
UNREADABLE = (aiohttp.ClientError, ConnectionError, ValueError, HttpProcessingError, web.RequestPayloadError)


def too_large() -> ApiError:
    return ApiError(413, f"the audio file is larger than {MAX_FILE_BYTES} bytes (25 MB)",
                    type="request_too_large", param=FILE_FIELD)


def broken_upload(exc: BaseException) -> ApiError:
    return bad_request(f"the multipart upload could not be read: {type(exc).__name__}", FILE_FIELD)


def declared_too_large(request: web.BaseRequest) -> bool:
    return request.content_length is not None and request.content_length > MAX_FILE_BYTES + FORM_OVERHEAD_BYTES


async def expect_continue(request: web.Request) -> None:
    """`Expect: 100-continue` (curl sends it for large uploads): invite the body only when its
    declared length is acceptable; otherwise the handler answers 413 before it is sent."""
    expect = request.headers.get("Expect", "").lower()
    invited = expect == "100-continue" and request.version == aiohttp.HttpVersion11
    if invited and not declared_too_large(request):
        await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        request.writer.output_size = 0  # as aiohttp's own handler: the response has not begun


async def open_form(request: web.Request) -> "Form":
    """The request's multipart form, refused at once when its declared length is too large."""
    if declared_too_large(request):
        raise too_large()
    if request.content_type != "multipart/form-data":
        raise bad_request("send multipart/form-data with the parts `file` and `model`", FILE_FIELD)
    try:
        return Form(await request.multipart(), request[BODY_HOLD], declared=request.content_length)
    except (ValueError, KeyError, AssertionError) as exc:  # no or a malformed boundary
        raise broken_upload(exc) from None


def part_text(value: str, what: str, *, ascii_only: bool = False) -> str:
    """A part header's value, as it will be sent on: aiohttp hands over bytes that are not
    UTF-8 as surrogates, which cannot be encoded again; names and types are ASCII."""
    if not (printable(value) if ascii_only else value.isprintable()):
        raise bad_request(f"a form part's {what} must be printable {'ASCII' if ascii_only else 'text'}",
                          FILE_FIELD)
    return value


async def read_field(part: BodyPartReader) -> str:
    data = bytearray()
    while chunk := await part.read_chunk(8192):
        data += chunk
        if len(data) > MAX_FIELD_BYTES:
            raise bad_request(f"form field {part.name!r} is longer than {MAX_FIELD_BYTES} bytes", part.name)
    try:
        return data.decode(part.get_charset("utf-8"))
    except (UnicodeDecodeError, LookupError):
        raise bad_request(f"form field {part.name!r} is not UTF-8 text", part.name) from None


class Form:
    """The form as it arrives; `fields` grows as parts are read, `failure` names what went
    wrong on the client's side while the form was being streamed upstream."""

    def __init__(self, reader: MultipartReader, hold: BodyHold, limit: int = MAX_FILE_BYTES,
                 declared: int | None = None) -> None:
        self.fields: list[tuple[str, str]] = []
        # The most audio the form can carry: its declared length, else the limit.
        self.size_bound = min(declared, limit) if declared is not None else limit
        self._hold = hold  # the fields and the spool's memory are held in memory: budgeted
        self.failure: ApiError | None = None
        self.file_bytes = 0
        self._reader, self._limit = reader, limit
        self._file: BodyPartReader | None = None  # the file part, while it is to be streamed on
        self._spool: tempfile.SpooledTemporaryFile[bytes] | None = None
        self._filename, self._content_type = "", ""

    def value(self, name: str) -> str | None:
        """The last value of field `name` read so far."""
        return next((value for field, value in reversed(self.fields) if field == name), None)

    @property
    def has_file(self) -> bool:
        return self._file is not None or self._spool is not None

    async def read_head(self) -> None:
        """Read the fields before the file; without a model among them, spool the file and
        read the rest of the form too."""
        try:
            self._file = await self._fields_until_file()
            if self._file is not None and self.value("model") is None:
                await self._spool_file(self._file)
                await self._trailing_fields()
        except UNREADABLE as exc:
            raise broken_upload(exc) from None

    async def parts(self, check: FieldCheck) -> AsyncIterator[FormField | FilePart]:
        """The form for upstream: the fields read so far, the file, then the fields after it,
        each value through `check`. Failures are kept in `failure` before they propagate."""
        try:
            for name, value in list(self.fields):
                yield FormField(name, check(name, value))
            if self._spool is not None:
                yield FilePart(self._filename, self._content_type, self._file_chunks(_spooled(self._spool)))
            elif self._file is not None:
                yield FilePart(self._filename, self._content_type, self._file_chunks(self._counted(self._file)))
            async for name, value in self._read_trailing():
                yield FormField(name, check(name, value))
        except ApiError as exc:
            self.failure = exc
            raise

    def close(self) -> None:
        if self._spool is not None:
            self._spool.close()

    async def _fields_until_file(self) -> BodyPartReader | None:
        while (part := await self._reader.next()) is not None:
            if not isinstance(part, BodyPartReader):
                raise bad_request("nested multipart parts are not supported", FILE_FIELD)
            name = part_text(part.name or "", "name", ascii_only=True)
            if name == FILE_FIELD:
                self._filename = part_text(part.filename or FILE_FIELD, "filename")
                self._content_type = part_text(part.headers.get("Content-Type", "application/octet-stream"),
                                               "Content-Type", ascii_only=True)
                return part
            value = await read_field(part)
            await self._hold.take(len(value))
            self.fields.append((name, value))
        return None

    async def _trailing_fields(self) -> None:
        if await self._fields_until_file() is not None:
            raise bad_request("the form holds more than one file", FILE_FIELD)

    async def _read_trailing(self) -> AsyncIterator[tuple[str, str]]:
        """The fields after a streamed file, as they are read (none after a spooled one)."""
        if self._spool is not None:
            return
        known = len(self.fields)
        try:
            await self._trailing_fields()
        except UNREADABLE as exc:
            raise broken_upload(exc) from None
        for name, value in self.fields[known:]:
            yield name, value

    async def _counted(self, part: BodyPartReader) -> AsyncIterator[bytes]:
        while chunk := await part.read_chunk(CHUNK_BYTES):
            self.file_bytes += len(chunk)
            if self.file_bytes > self._limit:
                raise too_large()
            yield chunk

    async def _spool_file(self, part: BodyPartReader) -> None:
        await self._hold.take(SPOOL_MEMORY_BYTES)  # the most of the file kept in memory
        self._spool = tempfile.SpooledTemporaryFile(  # noqa: SIM115 (outlives this call: close() ends it)
            max_size=SPOOL_MEMORY_BYTES)
        async for chunk in self._counted(part):
            self._spool.write(chunk)
        self._file = None

    async def _file_chunks(self, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        """The file's bytes, from the spool or straight from the client; a failure to read
        them is kept in `failure` before it propagates."""
        try:
            async for chunk in chunks:
                yield chunk
        except ApiError as exc:
            self.failure = exc
            raise
        except UNREADABLE as exc:
            self.failure = broken_upload(exc)
            raise self.failure from None


async def _spooled(spool: tempfile.SpooledTemporaryFile[bytes]) -> AsyncIterator[bytes]:
    spool.seek(0)
    while chunk := spool.read(CHUNK_BYTES):
        yield chunk
