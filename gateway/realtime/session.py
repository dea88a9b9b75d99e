"""Realtime: the client's WebSocket relayed to the provider's, both ways, billed from response.done.

The protocol is the client's choice: GA by default, beta when it asks with `OpenAI-Beta:
realtime=v1` (or, from a browser, which cannot set headers, the `openai-beta.realtime-v1`
subprotocol); the provider is asked for the same one. Both report usage in `response.done` alike.

Messages are relayed one by one as they arrive, text and binary alike, never buffered or
rewritten. The gateway reads only the usage of each `response.done` event the provider sends.
The session is recorded once, when it ends, as one request charged for the usage summed over all
its responses; also when the client vanishes mid-response (usage the provider never reported,
of a response cut short, is not estimated). When either side closes, the other is closed too.

Paid sessions hold credit per response (gateway.billing.reservations): what the responses so far
cost plus the worst case of every response asked for and not yet done (`session_ceiling`; at
least one, the next, which server VAD may start unasked). Held for one when the session opens,
topped up before each `response.create` the client sends to cover it and every one still pending
(one that does not fit is answered with an `error` event and not relayed), and brought back to
what the pending ones need from each `response.done`. A response.create the provider refuses
stays counted until a response.done (VAD's too) takes it off: held more, never less.
"""

import asyncio
from collections.abc import Callable
from typing import Any

import aiohttp
import msgspec
import structlog
from aiohttp import WSCloseCode, WSMsgType, web

from gateway.billing import ceilings, reservations
from gateway.billing.charging import bill
from gateway.catalogue import Resolved
from gateway.edge.errors import ApiError, UpstreamError, bad_request, ledger_unavailable
from gateway.jsonio import encode
from gateway.ops.facts import CLIENT, PROVIDER
from gateway.edge.middleware import KEY_SUBPROTOCOL
from gateway.providers.capabilities import RealtimeProvider
from gateway.providers.openai.adapter import BETA_HEADER, REALTIME_BETA, input_output_usage
from gateway.resolution import REALTIME, Served
from gateway.routing import failover
from gateway.routing.router import Plan
from gateway.services import Caller, Services
from gateway.edge.state import SESSIONS
from gateway.providers.usage import Usage
from ledger.recorder import LedgerUnavailable

ROUTE = "/v1/realtime"
PROTOCOL = "realtime"  # the subprotocol the handshake selects (never the key's)
BETA_SUBPROTOCOL = "openai-beta.realtime-v1"  # how a browser asks for the beta protocol
MAX_MESSAGE_BYTES = 16 * 1024 * 1024  # audio appends are large; OpenAI accepts events up to 15 MiB
CLOSE_REASON_BYTES = 123  # the most a close frame's reason may hold
DONE_MARKER = '"response.done"'
CREATE_MARKER = '"response.create"'
RELAYED = (WSMsgType.TEXT, WSMsgType.BINARY)

log = structlog.get_logger("gateway.realtime.session")


class _Response(msgspec.Struct):
    usage: Any = None  # checked by billing's rule (`input_output_usage`), not by the decoder


class _ServerEvent(msgspec.Struct):
    """The part of a server event billing reads; every other field is skipped unparsed."""

    type: str = ""
    response: _Response | None = None


_EVENT = msgspec.json.Decoder(_ServerEvent)


def response_done(text: str) -> _ServerEvent | None:
    """A `response.done` event; None for any other event (or one that is not JSON)."""
    if DONE_MARKER not in text:  # most events are deltas: skip them without decoding
        return None
    try:
        event = _EVENT.decode(text)
    except msgspec.DecodeError as exc:  # ValidationError included; relayed all the same
        log.warning("realtime_event_unreadable", error=str(exc))
        return None
    return event if event.type == "response.done" else None


def usage_of(done: _ServerEvent) -> Usage | None:
    """The usage a `response.done` reports, if any. UpstreamError 502 when the report is not
    sound (negative, fractional, textual, huge or inconsistent counts)."""
    return None if done.response is None or done.response.usage is None else input_output_usage(done.response.usage)


def reported_usage(text: str) -> Usage | None:
    """The usage a `response.done` event reports; None for any other event (`usage_of`)."""
    return None if (done := response_done(text)) is None else usage_of(done)


def added(total: Usage, more: Usage) -> Usage:
    """Two responses' usage as one; the tier is the latest's (a session's responses report none today)."""
    return Usage(total.prompt_tokens + more.prompt_tokens, total.completion_tokens + more.completion_tokens,
                 total.cached_prompt_tokens + more.cached_prompt_tokens,
                 total.cache_write_tokens + more.cache_write_tokens,
                 total.cache_write_1h_tokens + more.cache_write_1h_tokens, more.service_tier or total.service_tier)


def close_code(message: aiohttp.WSMessage, lost: int) -> int:
    """The code to close the other side with, after `message` ended this side: a peer's
    deliberate code as it is, `lost` when the connection broke without a close frame."""
    if message.type is WSMsgType.CLOSE:
        code = message.data
        deliberate = code in (WSCloseCode.OK, WSCloseCode.GOING_AWAY) or 3000 <= code <= 4999
        return code if deliberate else WSCloseCode.OK
    return WSCloseCode.OK if message.type is WSMsgType.CLOSING else lost


def close_reason(message: aiohttp.WSMessage, redact: Callable[[str], str] = str) -> bytes:
    reason = message.extra if message.type is WSMsgType.CLOSE and isinstance(message.extra, str) else ""
    return redact(reason).encode()[:CLOSE_REASON_BYTES]


def offered_protocols(header: str) -> list[str]:
    return [protocol.strip() for protocol in header.split(",") if protocol.strip()]


def check_handshake(request: web.Request) -> None:
    """400 before anything is opened for a request that is not a WebSocket upgrade, or whose
    browser-style key subprotocol comes without `realtime` (aiohttp logs the offered protocols
    when none is selected, and the key must never reach a log)."""
    offered = offered_protocols(request.headers.get("Sec-WebSocket-Protocol", ""))
    if PROTOCOL not in offered and any(p.startswith(KEY_SUBPROTOCOL) for p in offered):
        raise bad_request(f"offer the {PROTOCOL!r} subprotocol along with the key subprotocol",
                          "Sec-WebSocket-Protocol")
    if not web.WebSocketResponse(protocols=(PROTOCOL,)).can_prepare(request).ok:
        raise bad_request("GET /v1/realtime is a WebSocket: send an Upgrade request")


def wants_beta(request: web.Request) -> bool:
    """Whether the client speaks the beta protocol (it said so); otherwise GA."""
    offered = offered_protocols(request.headers.get("Sec-WebSocket-Protocol", ""))
    return REALTIME_BETA in request.headers.get(BETA_HEADER, "") or BETA_SUBPROTOCOL in offered


async def realtime_route(services: Services, model: str) -> Plan[Served[RealtimeProvider]]:
    """The providers of the realtime model the query names, in order; 400 or 501 as for every route."""
    if not model:
        raise bad_request("the model query parameter is required: GET /v1/realtime?model=<model>", "model")
    return await failover.plan(services, {}, model, REALTIME)


async def open_session(services: Services, caller: Caller, model_id: str, *, beta: bool = False
                       ) -> "RealtimeSession":
    """Open the WebSocket of the first provider that accepts it (402 without credit or own key);
    when none does, the last refusal is the client's error response, recorded and not charged."""
    route = await realtime_route(services, model_id)
    answered = await failover.answer(
        services, caller, route, lambda served, key: served.provider.open_realtime(
            served.model.upstream_model, key, MAX_MESSAGE_BYTES, beta=beta),
        path=ROUTE, model=model_id, stream=True,
        ceiling=lambda model: session_ceiling(services, model, 0, Usage(), 1))
    return RealtimeSession(services, caller, answered.served.model, answered.answer, answered.api_key)


def session_ceiling(services: Services, model: Resolved, client_bytes: int, usage: Usage, responses: int) -> int:
    """What a session may cost: the `usage` of its responses so far, and `responses` more at worst.
    Each writes the model's output limit; its input is at most what the client sent and every
    response before it wrote (a token is at least a byte), never beyond the context."""
    most = ceilings.output_limit(model)
    first = client_bytes + usage.completion_tokens
    prompts = growing_sum(first, most, responses, model.record.context_length)
    return ceilings.tokens(services, model, prompts, most * responses, spent=usage)


def growing_sum(first: int, step: int, terms: int, cap: int) -> int:
    """first + (first + step) + ... (`terms` terms), each term at most `cap` (0: no cap); in closed
    form, as a client may ask for many responses at once."""
    if cap and first >= cap:
        below = 0
    elif cap and step:
        below = min(terms, -(-(cap - first) // step))  # the terms j with first + j * step < cap
    else:
        below = terms
    return below * first + step * below * (below - 1) // 2 + (terms - below) * cap


async def end_sessions(app: web.Application) -> None:
    """on_shutdown: close every open session with 1001 (going away); each records as it ends, so
    its charge is recorded while the ledger is still open rather than after aiohttp's shutdown
    timeout."""
    await asyncio.gather(*(session.going_away() for session in app[SESSIONS].copy()))


class RealtimeSession:
    """One client WebSocket and its provider WebSocket, pumped both ways until either closes."""

    def __init__(self, services: Services, caller: Caller, model: Resolved,
                 upstream: aiohttp.ClientWebSocketResponse, api_key: str) -> None:
        self.services, self.caller, self.model = services, caller, model
        self.upstream, self.byok = upstream, bool(api_key)
        # The provider's events may quote the key it received (its error events do): never relayed.
        self._redact = services.redactor.including(api_key).by_value
        self.usage, self.upgraded, self.error = Usage(), False, ""
        self.client_bytes = 0  # what the client sent: a bound on the input of the next response
        self.pending = 0  # responses asked for (response.create relayed) whose response.done has not come
        # Both pumps change the session's holds; one change at a time keeps its list and the ledger alike.
        self._holding = asyncio.Lock()
        self.client = web.WebSocketResponse(protocols=(PROTOCOL,), max_msg_size=MAX_MESSAGE_BYTES)

    async def run(self, request: web.Request) -> web.WebSocketResponse:
        client, sessions = self.client, request.app[SESSIONS]
        sessions.add(self)
        try:
            await client.prepare(request)
            self.upgraded = True
            async with asyncio.TaskGroup() as pumps:
                pumps.create_task(self._pump(client, self.upstream, lost=WSCloseCode.GOING_AWAY))
                pumps.create_task(self._pump(self.upstream, client, lost=WSCloseCode.INTERNAL_ERROR))
        finally:  # also when the handler is cancelled because the client vanished
            sessions.discard(self)
            await asyncio.shield(self._end(client))
        return client

    async def going_away(self) -> None:
        """End the session from the server's side: the pumps see the close and finish."""
        await self.upstream.close(code=WSCloseCode.GOING_AWAY)

    async def _pump(self, source: web.WebSocketResponse | aiohttp.ClientWebSocketResponse,
                    sink: web.WebSocketResponse | aiohttp.ClientWebSocketResponse, lost: int) -> None:
        """Relay `source`'s messages to `sink` as they arrive; when `source` ends, close `sink`."""
        message = await source.receive()
        from_provider = source is self.upstream
        while message.type in RELAYED:
            if not from_provider and not await self._admitted(message):
                message = await source.receive()
                continue
            done = from_provider and message.type is WSMsgType.TEXT and self._done(message.data)
            try:
                if message.type is WSMsgType.TEXT:
                    await sink.send_str(self._redact(message.data) if from_provider else message.data)
                else:
                    await sink.send_bytes(message.data)
            except ConnectionError:
                return  # `sink` is gone; the other pump sees it end and closes `source`
            if done:  # settled once the client has its response.done: the hold is not on its path
                await self._hold()
            message = await source.receive()
        if source is self.upstream and message.type not in (WSMsgType.CLOSE, WSMsgType.CLOSING):
            self.error = "the provider's realtime connection broke off"
        self.caller.facts.closed(PROVIDER if from_provider else CLIENT)  # the first side to end
        reason = close_reason(message, self._redact if from_provider else str)
        await sink.close(code=close_code(message, lost), message=reason)

    async def _admitted(self, message: aiohttp.WSMessage) -> bool:
        """Whether to relay the client's `message`: a response.create only once its response is
        covered, with every one still pending; anything else at once (its size counted toward
        the input of the responses to come)."""
        self.client_bytes += ceilings.size(message.data)
        return message.type is not WSMsgType.TEXT or CREATE_MARKER not in message.data \
            or await self._hold(asked=1)

    async def _hold(self, asked: int = 0) -> bool:
        """Hold the session's worst case with `asked` more responses pending (`_cover`) and count
        them: False, and the client told why in an `error` event, when that does not fit (after
        a response.done the session goes on, its next response.create refused)."""
        try:
            async with self._holding:  # the count and the hold change together
                await self._cover(max(self.pending + asked, 1))
                self.pending += asked
        except (ApiError, LedgerUnavailable) as exc:
            refusal = exc if isinstance(exc, ApiError) else ledger_unavailable("this response was not started")
            if asked:
                await self.client.send_str(encode({"type": "error", **refusal.body()}).decode())
            return False
        return True

    async def _cover(self, responses: int) -> None:
        """Hold what the session spent and the worst case of `responses` more, releasing any
        excess; ApiError (402) when that does not fit."""
        if self.byok:
            return
        worst = session_ceiling(self.services, self.model, self.client_bytes, self.usage, responses)
        await reservations.top_up(self.services, self.caller, worst)
        await reservations.shrink(self.services, self.caller, worst)

    def _done(self, text: str) -> bool:
        """Note a response.done: one response less pending, its usage counted; whether it was one."""
        if (done := response_done(text)) is None:
            return False
        self.pending = max(self.pending - 1, 0)  # at 0 already: a response server VAD started
        try:
            usage = usage_of(done)
        except UpstreamError as exc:  # an unsound report is never charged; the session names it
            log.warning("realtime_usage_invalid", error=exc.message)
            self.error = exc.message
            return True
        if usage is not None:
            self.usage = added(self.usage, usage)
        return True

    async def _end(self, client: web.WebSocketResponse) -> None:
        """Record the session (first: a slow close must not delay the charge), close both sides."""
        try:
            await self._record()
        finally:  # a charge the ledger refuses still closes both sockets
            await self.upstream.close()
            if client.prepared:
                await client.close(code=WSCloseCode.GOING_AWAY)

    async def _record(self) -> None:
        await bill(self.services, self.caller, ROUTE, self.model, self.usage, None, byok=self.byok,
                   status=200 if self.upgraded else 499, stream=True, error=self.error)
