"""Request middleware: a request id, one canonical log line, authentication, JSON errors (in
the shape of the route's API, see gateway.edge.errors.Dialect), cost headers. What each asks of a
route (public or keyed, its dialect, where its key may come) it reads from the route table
(gateway.edge.routes), found once per request by `observe`."""

import asyncio
import sys
import time

import structlog
from aiohttp import web
from aiohttp.typedefs import Handler

from gateway.accounts import key_policy
from gateway.billing import reservations
from gateway.edge.parsing import check_url, printable
from gateway.edge.errors import ApiError, Dialect, ledger_unavailable, unauthorized
from gateway.ops.facts import RequestFacts
from gateway.accounts.keys import new_id
from gateway.edge.route_index import no_route_matched, unknown_route
from gateway.edge.routes import RouteFacts, unrouted
from gateway.services import Caller
from gateway.edge.state import CALLER, FACTS, METRICS, REQUEST_ID, ROUTE, ROUTES, SERVICES, STARTED, TRACING
from ledger.recorder import LedgerUnavailable

log = structlog.get_logger("gateway.request")

KEY_SUBPROTOCOL = "openai-insecure-api-key."
CLIENT_CLOSED = 499  # nginx's "client closed request": the status the relays record as well
PROVIDER_HEADER = "X-Gateway-Provider"  # the provider that answered (or, on failure, the last one tried)


@web.middleware
async def observe(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Assign the request id, render errors as JSON, and log one line when the request ends,
    with the status it really ended with: 499 when the client left before the answer was
    complete, 101 for a WebSocket session however it closed, 500 for a failure of ours."""
    request_id = new_id("req")
    request[ROUTE] = _route(request)
    request[REQUEST_ID] = request_id
    facts = request[FACTS] = RequestFacts()
    started = time.perf_counter()
    structlog.contextvars.bind_contextvars(request_id=request_id)
    tracing = request.app.get(TRACING)
    traced = tracing.server_span(request) if tracing is not None else None
    status = 500
    try:
        response = await _render_errors(request, handler)
        status = _ended(request, response.status)
        return response
    except (ConnectionError, asyncio.CancelledError):
        # aiohttp cancels the handler when its client disconnects; a write to a gone client fails
        status = _ended(request, CLIENT_CLOSED if _client_gone(request) else 500)
        raise
    finally:
        seconds = time.perf_counter() - started
        request.app[METRICS].observe_request(request, status, seconds, facts)
        log.info("request", method=request.method, route=request.path, status=status,
                 latency_ms=round(seconds * 1000, 2), **facts.log_fields())
        structlog.contextvars.clear_contextvars()
        if traced is not None and tracing is not None:
            caller = request.get(CALLER)
            tracing.end_server_span(traced, request, status, facts, request_id, caller and caller.org_id)


def _route(request: web.Request) -> RouteFacts:
    """The request's endpoint in the app's route table (an app of bare handlers has none)."""
    table = request.app.get(ROUTES)
    return unrouted(request.path) if table is None else table.facts(request)


def _dialect(request: web.Request) -> Dialect:
    """The shape of the request's errors; by its path alone before `observe` has found its route."""
    route = request.get(ROUTE)
    return unrouted(request.path).dialect if route is None else route.dialect


def _ended(request: web.Request, status: int) -> int:
    """`status`, unless the request became a WebSocket session: then 101 (the upgrade
    succeeded; how the session ended is its close code)."""
    if isinstance(session := request.get(STARTED), web.WebSocketResponse):
        request[FACTS].ws_close_code = session.close_code
        return 101
    return status


def _client_gone(request: web.Request) -> bool:
    transport = request.transport
    return transport is None or transport.is_closing()


async def add_request_id(request: web.Request, response: web.StreamResponse) -> None:
    """on_response_prepare: every response, streamed ones included, names its request id (as
    `request-id` too on Anthropic's routes, where its SDK reads it); one whose cost is known
    before it is sent (gateway.ops.facts) carries it in headers."""
    if (request_id := request.get(REQUEST_ID)) is not None:
        response.headers["X-Request-Id"] = request_id
        if _dialect(request) is Dialect.ANTHROPIC:
            response.headers["request-id"] = request_id
    if (facts := request.get(FACTS)) is not None and facts.provider:
        response.headers[PROVIDER_HEADER] = facts.provider
    if facts is not None and facts.cost_headers:
        response.headers.update(facts.cost_headers)
    request[STARTED] = response


async def _render_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        check_url(request)
        return await handler(request)
    except ApiError as exc:
        return _answer(request, exc)
    except LedgerUnavailable:
        return _answer(request, ledger_unavailable())
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        if exc.status == 404 and no_route_matched(request):
            return _answer(request, unknown_route(request))
        return _answer(request, ApiError(exc.status, exc.reason or "error", type=_type_of(exc.status),
                                         headers={k: v for k, v in exc.headers.items() if k == "Allow"}))
    except ConnectionError:
        raise  # the client went away: nothing to answer, and not a fault of ours
    except Exception:  # the boundary: a bug, logged once with its traceback, answered as JSON
        log.exception("unhandled_error", method=request.method, route=request.path)
        return _after_failure(request)


def _answer(request: web.Request, error: ApiError) -> web.StreamResponse:
    """`error` as its JSON response; once a response has begun (a status line is out, or a
    WebSocket is open), no second one can follow, so that one is cut instead."""
    if STARTED in request:
        log.warning("error_after_response_began", status=error.status, error=error.message)
        return _after_failure(request)
    return error.response(error.body_in(_dialect(request), request[REQUEST_ID]))


def _after_failure(request: web.Request) -> web.StreamResponse:
    """The documented 500 body; or, once a response has begun, that response with the
    connection cut, so the client sees a broken answer rather than a complete one."""
    if (started := request.get(STARTED)) is not None:
        if request.transport is not None:
            request.transport.abort()
        return started
    return _answer(request, internal_error(request[REQUEST_ID]))


def internal_error(request_id: str) -> ApiError:
    """Never the exception's text: it could carry a key or a client's data."""
    return ApiError(500, f"the gateway failed unexpectedly; request id {request_id} names it in"
                         " the operator's logs", type="server_error")


def _type_of(status: int) -> str:
    return {404: "not_found", 405: "method_not_allowed", 413: "request_too_large"}.get(
        status, "invalid_request_error")


@web.middleware
async def authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Resolve the bearer key to its organization; 401 for a missing, unknown or revoked key."""
    if request[ROUTE].public:
        return await handler(request)
    key = _presented_key(request)
    if not key:
        raise unauthorized("missing API key: send 'Authorization: Bearer <key>'")
    # Keys are printable ASCII; other bytes (aiohttp hands them over as surrogates) name no key.
    principal = request.app[SERVICES].directory.authenticate(key) if printable(key) else None
    if principal is None:
        raise unauthorized("invalid or revoked API key")
    services = request.app[SERVICES]
    if (expired := key_policy.expired_at(services, principal.key_id)) is not None:
        raise await key_policy.refuse_expired(services, Caller(principal, request[REQUEST_ID]), request.path, expired)
    await services.limiter.admit(principal.key_id, services.limits_for(principal.key_id))
    caller = request[CALLER] = Caller(principal, request[REQUEST_ID], facts=request[FACTS])
    structlog.contextvars.bind_contextvars(org_id=principal.org_id)
    try:
        return await handler(request)
    finally:  # a request's record releases its holds; one that ends without it releases them here
        reservations.release_all(services, caller, request.path, sys.exc_info()[1])


def _presented_key(request: web.Request) -> str:
    scheme, _, credentials = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() == "bearer" and credentials.strip():
        return credentials.strip()
    if request[ROUTE].key_in_subprotocol and (key := _subprotocol_key(request)):
        return key
    return request.headers.get("x-api-key", "").strip()


def _subprotocol_key(request: web.Request) -> str:
    """The key a browser offers as the `openai-insecure-api-key.<KEY>` WebSocket subprotocol
    (browsers cannot set headers on a WebSocket); "" when none is offered."""
    for protocol in request.headers.get("Sec-WebSocket-Protocol", "").split(","):
        if (protocol := protocol.strip()).startswith(KEY_SUBPROTOCOL):
            return protocol.removeprefix(KEY_SUBPROTOCOL)
    return ""


