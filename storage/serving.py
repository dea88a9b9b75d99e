"""Serving a stored object over HTTP: conditional GET/HEAD with RFC 9110 byte ranges.

The body is streamed from S3 chunk by chunk into the response, never held whole. The first
S3 read happens before the status line is sent, so a failure there can still become a proper
error answer (StorageError for the caller to render); a failure after that can only cut the
connection, so the client sees a truncated response rather than a short one passed as whole.
"""

import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator

import msgspec
from aiohttp import hdrs, web

from storage import byteranges
from storage.errors import StorageError
from storage.objects import ObjectStore, StoredObject
from storage.preconditions import none_match
from storage.ranges import Full, Partial, Unsatisfiable, choose

log = logging.getLogger("storage.serving")


class Piece(msgspec.Struct, frozen=True):
    """Framing bytes to send, then bytes [first, last] of the object (None, None: all)."""

    head: bytes
    first: int | None
    last: int | None
    length: int


class Body(msgspec.Struct, frozen=True):
    """Everything a response body is made of, in order, and its total length."""

    pieces: tuple[Piece, ...]
    tail: bytes
    length: int


async def serve_object(request: web.Request, store: ObjectStore, obj: StoredObject,
                       content_type: str, *,
                       cache_control: str = "private, max-age=3600") -> web.StreamResponse:
    """Answer a GET or HEAD for `obj`: 200, 206 (one or several ranges), 304 or 416.

    Every answer carries Accept-Ranges, ETag and Cache-Control. HEAD gets exactly the status
    and headers the same GET would, without a body or any S3 read. Raises StorageError if S3
    fails before the response has started; after that, the connection is aborted instead.
    """
    if request.method not in (hdrs.METH_GET, hdrs.METH_HEAD):
        raise web.HTTPMethodNotAllowed(request.method, [hdrs.METH_GET, hdrs.METH_HEAD])
    headers: dict[str, str] = {hdrs.ACCEPT_RANGES: "bytes", hdrs.ETAG: obj.etag,
                               hdrs.CACHE_CONTROL: cache_control}
    if none_match(request.headers.get(hdrs.IF_NONE_MATCH), obj.etag):
        return web.Response(status=304, headers=headers)
    answer = choose(request.headers.get(hdrs.RANGE), request.headers.get(hdrs.IF_RANGE),
                    obj.size, obj.etag)
    if isinstance(answer, Unsatisfiable):
        headers[hdrs.CONTENT_RANGE] = f"bytes */{obj.size}"
        headers[hdrs.CONTENT_LENGTH] = "0"  # explicit, or aiohttp omits it for HEAD
        return web.Response(status=416, headers=headers)
    status, body = _plan(answer, obj.size, content_type, headers)
    return await _send(request, store, obj, web.StreamResponse(status=status, headers=headers),
                       body)


def _plan(answer: Full | Partial, size: int, content_type: str,
          headers: dict[str, str]) -> tuple[int, Body]:
    """The status and body for `answer`; adds the Content-Range / Content-Type they need."""
    match answer:
        case Partial(ranges=((first, last),)):
            headers[hdrs.CONTENT_RANGE] = byteranges.content_range(first, last, size)
            status, body = 206, _plain_body(first, last)
        case Partial(ranges=ranges):
            body, headers[hdrs.CONTENT_TYPE] = _multipart_body(ranges, size, content_type)
            status = 206
        case Full():
            status, body = 200, _whole_body(size)
    headers.setdefault(hdrs.CONTENT_TYPE, content_type)
    return status, body


def _whole_body(size: int) -> Body:
    return Body(pieces=(Piece(head=b"", first=None, last=None, length=size),), tail=b"",
                length=size)


def _plain_body(first: int, last: int) -> Body:
    length = last - first + 1
    return Body(pieces=(Piece(head=b"", first=first, last=last, length=length),), tail=b"",
                length=length)


def _multipart_body(ranges: tuple[tuple[int, int], ...], size: int,
                    content_type: str) -> tuple[Body, str]:
    """The multipart/byteranges body for `ranges`, and the Content-Type naming its boundary."""
    layout = byteranges.layout(ranges, size, content_type)
    pieces = tuple(Piece(head=part.head, first=part.first, last=part.last,
                         length=part.last - part.first + 1) for part in layout.parts)
    return Body(pieces=pieces, tail=layout.tail, length=layout.length), layout.content_type


async def _send(request: web.Request, store: ObjectStore, obj: StoredObject,
                response: web.StreamResponse, body: Body) -> web.StreamResponse:
    """Start `response` with the body's Content-Length, then stream the body (GET only)."""
    response.content_length = body.length
    if request.method == hdrs.METH_HEAD:
        await response.prepare(request)
        await response.write_eof()
        return response
    first, *rest = body.pieces
    async with contextlib.aclosing(_read(store, obj, first)) as chunks:
        opening = await anext(chunks, b"")  # S3 failing here raises: nothing is sent yet
        await response.prepare(request)
        try:
            await _write_piece(response, first, opening, chunks)
            for piece in rest:
                async with contextlib.aclosing(_read(store, obj, piece)) as more:
                    await _write_piece(response, piece, b"", more)
            await _write(response, body.tail)
        except StorageError as exc:
            _abort(request, obj, exc)
            return response
    await response.write_eof()
    return response


def _read(store: ObjectStore, obj: StoredObject, piece: Piece) -> AsyncGenerator[bytes, None]:
    """The piece's bytes from S3, refused if the object is no longer the one we describe."""
    return store.stream(obj.key, piece.first, piece.last, if_match=obj.etag)


async def _write_piece(response: web.StreamResponse, piece: Piece, opening: bytes,
                       chunks: AsyncIterator[bytes]) -> None:
    """Write the piece's framing, `opening` (a chunk already taken) and the rest of `chunks`.

    StorageError if S3 sends more or fewer bytes than asked: that would otherwise shift every
    later byte or part of the response.
    """
    await _write(response, piece.head)
    sent = await _write_counted(response, opening, 0, piece.length)
    async for chunk in chunks:
        sent = await _write_counted(response, chunk, sent, piece.length)
    if sent != piece.length:
        raise StorageError(f"S3 sent {sent} of the {piece.length} bytes asked for")


async def _write_counted(response: web.StreamResponse, chunk: bytes, sent: int,
                         expected: int) -> int:
    """Write `chunk` after `sent` bytes of a piece of `expected` bytes; the new count."""
    sent += len(chunk)
    if sent > expected:
        raise StorageError(f"S3 sent more than the {expected} bytes asked for")
    await _write(response, chunk)
    return sent


async def _write(response: web.StreamResponse, data: bytes) -> None:
    if data:
        await response.write(data)


def _abort(request: web.Request, obj: StoredObject, exc: StorageError) -> None:
    """Cut the connection mid-body, so the client cannot take a short body for a whole one.

    Closing the transport flushes what was written and then closes; the client sees fewer
    bytes than Content-Length promised. The caller is not told by an exception: it could not
    render one now that the status line is out.
    """
    log.error("aborted the response for %s after it started: %s", obj.key, exc)
    if request.transport is not None:
        request.transport.close()
