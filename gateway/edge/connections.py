"""Slow and idle clients are let go: header, body and keep-alive timeouts on every connection.

aiohttp closes a connection that idles between requests (`keepalive_timeout`), but puts no limit
on how long a request's headers or body may take to arrive: a client sending one byte a second
would hold its connection, and what the gateway keeps for it, for ever. The request handler here
adds both limits:

- headers: from the first byte of a request until its headers are complete, `header_s`; past it
  the connection is closed (there is no request yet to answer).
- body: while a request's body is arriving, a pause longer than `body_s` with the gateway ready
  to take more fails the body's reads with 408, which the request answers as JSON; the
  connection is closed after that answer. A pause the gateway caused (reading paused because the
  handler has not caught up, or is waiting for room in the body budget) is not the client's.

aiohttp offers no hook for its request handler, so `GuardedAppRunner` builds the server itself.
"""

import asyncio
from typing import Any

import msgspec
import structlog
from aiohttp import StreamReader, web
from aiohttp.web_protocol import RequestHandler

from gateway.edge.errors import ApiError
from gateway.accounts.keys import new_id
from gateway.edge.middleware import internal_error
from gateway.edge.state import REQUEST_ID

log = structlog.get_logger("gateway.edge.connections")


class Timeouts(msgspec.Struct, frozen=True):
    header_s: float
    body_s: float


def body_too_slow(timeout_s: float) -> ApiError:
    return ApiError(408, f"the request body paused for more than {timeout_s:g} s; send it again, faster",
                    type="request_timeout", headers={"Connection": "close"})


class GuardedRequestHandler(RequestHandler):
    """aiohttp's HTTP/1 connection with the header and body timeouts of `Timeouts`."""

    __slots__ = ("_body_timer", "_head_timer", "_last_body", "_last_data", "_timeouts")

    def __init__(self, manager: web.Server, *, timeouts: Timeouts, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self._timeouts = timeouts
        self._head_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        self._last_data = 0.0
        self._last_body: StreamReader | None = None  # of the newest request whose head was read

    def data_received(self, data: bytes) -> None:
        self._last_data = self._loop.time()
        was_awaiting = self._awaiting_request()
        # Between a head being taken for handling and its handler starting, the connection looks
        # idle; bytes arriving then belong to that request's body, and begin no new head.
        continues_body = self._last_body is not None and not self._last_body.is_eof()
        super().data_received(data)
        if self._messages:
            self._last_body = self._messages[-1][1]
        if self._awaiting_request():
            if self._head_timer is None and data and not continues_body:  # a head has begun, not ended
                self._head_timer = self._loop.call_later(self._timeouts.header_s, self._head_overdue)
        elif was_awaiting:  # a head is complete: its body, if still arriving, is watched from now
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None
            if self._last_body is not None and not self._last_body.is_eof():  # not a GET, nor a whole body
                self._watch_body(self._timeouts.body_s)

    def handle_error(self, request: web.BaseRequest, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        """aiohttp's own answers, in the one JSON error body: a refusal before any handler (a
        request line or header it cannot parse; status < 500), or a failure that got past the
        middlewares (in `observe`'s own bookkeeping, or an on_response_prepare hook), which is a
        bug: logged with its traceback, answered with the documented 500. The parser's message is
        neither echoed nor logged: it may quote a header's value, and a header may hold a key."""
        if request.writer.output_size > 0:  # as aiohttp: a response has begun, the connection is broken
            raise ConnectionError("a response was already sent; the error cannot be")
        request_id = request.get(REQUEST_ID) or new_id("req")
        if status < 500:
            log.info("request_unreadable", status=status, error=type(exc).__name__ if exc else "")
            error = ApiError(status, f"the request could not be read as HTTP ({status})")
        else:
            log.error("unhandled_error", method=request.method, route=request.path, request_id=request_id,
                      exc_info=exc)
            error = internal_error(request_id)
        response = error.response(error.body_for(request.path, request_id))
        response.force_close()
        return response

    def connection_lost(self, exc: BaseException | None) -> None:
        for timer in (self._head_timer, self._body_timer):
            if timer is not None:
                timer.cancel()
        super().connection_lost(exc)

    def _awaiting_request(self) -> bool:
        """Between requests: nothing is being handled and the next head is not complete."""
        return not self._request_in_progress and not self._messages

    def _head_overdue(self) -> None:
        self._head_timer = None
        if self._awaiting_request() and self.transport is not None:
            log.info("connection_closed", reason="request headers too slow", timeout_s=self._timeouts.header_s)
            self.force_close()

    def _watch_body(self, after_s: float) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
        self._body_timer = self._loop.call_later(after_s, self._body_check)

    def _body_check(self) -> None:
        """Fail the body of the request being handled if it paused too long; otherwise look again."""
        self._body_timer = None
        request = self._current_request
        if request is None:
            if not self._awaiting_request():  # queued behind another request: not started yet
                self._watch_body(self._timeouts.body_s)
            return
        if request.content.is_eof():
            return
        paused_s = self._loop.time() - self._last_data
        if self._reading_paused or paused_s < self._timeouts.body_s:  # the pause is ours, or short
            self._watch_body(self._timeouts.body_s - (0 if self._reading_paused else paused_s))
            return
        log.info("request_body_timed_out", timeout_s=self._timeouts.body_s)
        self._lingering_time = 0.0  # no waiting for the rest of a body that is not coming
        request.content.set_exception(body_too_slow(self._timeouts.body_s))


class GuardedServer(web.Server):
    def __init__(self, *args: Any, timeouts: Timeouts, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._timeouts = timeouts

    def __call__(self) -> GuardedRequestHandler:
        return GuardedRequestHandler(self, loop=self._loop, timeouts=self._timeouts, **self._kwargs)


class GuardedAppRunner(web.AppRunner):
    """An AppRunner whose connections have the header and body timeouts."""

    def __init__(self, app: web.Application, *, timeouts: Timeouts, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        self._timeouts = timeouts

    async def _make_server(self) -> web.Server:
        plain = await super()._make_server()  # starts the application, as aiohttp does
        # The same server with the same settings (aiohttp's Server keeps all but these in _kwargs),
        # only its connections are ours.
        return GuardedServer(plain.request_handler, request_factory=plain.request_factory,
                             handler_cancellation=plain.handler_cancellation, loop=plain._loop,
                             timeouts=self._timeouts, **plain._kwargs)
