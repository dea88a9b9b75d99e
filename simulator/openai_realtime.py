"""GET /v1/realtime: OpenAI's Realtime API over a WebSocket, deterministically, in GA's protocol
or, for a handshake with `OpenAI-Beta: realtime=v1`, beta's (`simulator.realtime_dialects`; the
event names below are beta's).

On connect the server sends ``session.created``. Client events it answers:

    session.update            -> session.updated (the fields given are merged into the session)
    conversation.item.create  -> conversation.item.created
    response.create           -> response.created, response.output_item.added,
                                 response.content_part.added, one delta per token
                                 (response.text.delta, or response.audio_transcript.delta and
                                 response.audio.delta when the modalities include audio), the
                                 matching *.done events, response.output_item.done, response.done
    input_audio_buffer.*, response.cancel: accepted silently
    anything else             -> an ``error`` event (the session stays open)

Binary frames are echoed back unchanged. The session ends when the client closes it.

Usage in ``response.done`` (the rules of `simulator.textgen`): input_tokens = the prompt-token
count of every conversation item so far, the assistant's earlier answers included (each item
counts like a chat message: its words plus 4); output_tokens = the completion tokens (16 by
default, ``Settings.completion_tokens``), capped by ``max_output_tokens`` /
``max_response_output_tokens``. Output tokens are text tokens, or audio tokens for audio.

Directives (``[sim:NAME=VALUE]``) in the text of the items created since the previous
response.create shape the next response: ``tokens``, ``tps``, ``cache_read`` (that many input
tokens reported as cached), and where the response stops early after K deltas: ``hang_after``
(no more events for this response), ``close_after`` (the server closes the WebSocket, code 1000),
``drop_after`` (the TCP connection is aborted); ``usage`` spoils the response.done usage as a
hostile provider would (`simulator.hostile`). A bad directive is answered with an error event.

The handshake is recorded like any provider request (``GET /_sim/requests``); the record's
``body`` is the list of client events received, in order (``{"binary_bytes": n}`` for a binary
frame). ``POST /_sim/realtime`` with ``{"status": CODE}`` makes later handshakes fail with that
HTTP status, ``{"hang": true}`` makes them never answer, ``{}`` restores normal service.
"""

import base64
import itertools
from typing import Annotated, Any

import aiohttp
import msgspec
import orjson
from aiohttp import WSCloseCode, WSMsgType, web

from simulator.behaviour import abandoned, pace
from simulator.connection import drop_connection, wait_until_gone
from simulator.directives import DirectiveError, ErrorStatus, NonNegative, parse_as
from simulator.hostile import UsageFault, spoiled_usage
from simulator.openai_chat import simulated_error
from simulator.openai_wire import error_response
from simulator.realtime_dialects import Dialect, dialect_of
from simulator.recording import RECORD_KEY, Outcome, decode_body
from simulator.settings import SETTINGS_KEY, Settings
from simulator.textgen import completion_text, count_prompt_tokens, iter_tokens

REALTIME_PATH = "/v1/realtime"
CONTROL_PATH = "/_sim/realtime"
PROTOCOL = "realtime"
MAX_MESSAGE_BYTES = 16 * 1024 * 1024  # audio appends are large; OpenAI accepts 15 MiB events
AUDIO_CHUNK = base64.b64encode(bytes(48)).decode()  # 24 samples of pcm16 silence per token
IGNORED_EVENTS = ("input_audio_buffer.append", "input_audio_buffer.clear", "input_audio_buffer.commit",
                  "response.cancel")


class RealtimeDirectives(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Per-response overrides; None means "not given" (see the module docstring)."""

    tokens: NonNegative | None = None
    tps: Annotated[float, msgspec.Meta(ge=0)] | None = None
    cache_read: NonNegative | None = None
    hang_after: NonNegative | None = None
    close_after: NonNegative | None = None
    drop_after: NonNegative | None = None
    usage: UsageFault | None = None  # a hostile provider's usage report (`simulator.hostile`)

    @property
    def cut(self) -> int | None:
        """After how many deltas the response stops early (None: it completes)."""
        return next((k for k in (self.drop_after, self.close_after, self.hang_after) if k is not None), None)


class Refusal(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """How handshakes are answered: an HTTP error status, never, or (neither) normally."""

    status: ErrorStatus | None = None
    hang: bool = False


class Control:
    """The app's realtime knobs, changed at run time through POST /_sim/realtime."""

    def __init__(self) -> None:
        self.refusal = Refusal()


CONTROL_KEY = web.AppKey("realtime_control", Control)
NO_REALTIME_DIRECTIVES = RealtimeDirectives()


async def realtime(request: web.Request) -> web.StreamResponse:
    """The handshake (or its simulated refusal), then the session until it ends."""
    refusal = request.app[CONTROL_KEY].refusal
    if refusal.status is not None:
        return simulated_error(refusal.status)
    if refusal.hang:
        await wait_until_gone(request)
        return abandoned(request, "disconnected")
    model = request.query.get("model", "")
    if not model:
        return error_response(400, "Missing required parameter: 'model'.", code="missing_required_parameter")
    ws = web.WebSocketResponse(protocols=(PROTOCOL,), max_msg_size=MAX_MESSAGE_BYTES)
    if not ws.can_prepare(request).ok:
        return error_response(400, "The realtime API is a WebSocket: send an Upgrade request.")
    await ws.prepare(request)
    session = Session(request, ws, request.app[SETTINGS_KEY], model, dialect_of(request))
    request[RECORD_KEY].body = session.received
    request[RECORD_KEY].settle(await session.serve())
    return ws


def item_texts(item: dict[str, Any]) -> list[str]:
    """The text pieces of a conversation item: each content part's text or transcript."""
    content = item.get("content")
    parts = content if isinstance(content, list) else []
    texts = (part.get("text") or part.get("transcript") for part in parts if isinstance(part, dict))
    return [text for text in texts if isinstance(text, str)]


def output_limit(value: Any) -> int | None:
    """A max_output_tokens setting as a cap (None for "inf" or absent)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def usage(input_tokens: int, output_tokens: int, cached: int, audio: bool) -> dict[str, Any]:
    """The ``usage`` object of ``response.done``."""
    cached = min(cached, input_tokens)
    return {"total_tokens": input_tokens + output_tokens, "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "input_token_details": {"cached_tokens": cached, "text_tokens": input_tokens, "audio_tokens": 0,
                                    "cached_tokens_details": {"text_tokens": cached, "audio_tokens": 0}},
            "output_token_details": {"text_tokens": 0 if audio else output_tokens,
                                     "audio_tokens": output_tokens if audio else 0}}


class Session:
    """One WebSocket session: its settings, its conversation, and the events it received."""

    def __init__(self, request: web.Request, ws: web.WebSocketResponse, settings: Settings,
                 model: str, dialect: Dialect) -> None:
        self.request, self.ws, self.settings, self.dialect = request, ws, settings, dialect
        self.config = dialect.session(model)
        self.items: list[list[str]] = []  # text pieces of every conversation item, in order
        self.pending: list[str] = []  # texts added since the last response.create (its directives)
        self.last_item_id: str | None = None
        self.received: list[Any] = []
        self._ids = itertools.count(1)

    def new_id(self, prefix: str) -> str:
        return f"{prefix}_sim{next(self._ids):04d}"

    async def send(self, event_type: str, **fields: Any) -> None:
        event = {"event_id": self.new_id("event"), "type": self.dialect.name(event_type), **fields}
        await self.ws.send_str(orjson.dumps(event).decode())

    async def error(self, code: str, message: str, client_event: Any = None) -> None:
        event_id = client_event.get("event_id") if isinstance(client_event, dict) else None
        await self.send("error", error={"type": "invalid_request_error", "code": code, "message": message,
                                        "param": None, "event_id": event_id})

    async def serve(self) -> Outcome:
        """Answer client events until the client closes; how the session ended."""
        try:
            await self.send("session.created", session=self.config)
            async for message in self.ws:  # ends on the client's close frame
                if (outcome := await self.on_message(message)) is not None:
                    return outcome
        except ConnectionError:  # a write after the client vanished
            return "disconnected"
        return "disconnected" if self.ws.close_code in (None, WSCloseCode.ABNORMAL_CLOSURE) else "completed"

    async def on_message(self, message: aiohttp.WSMessage) -> Outcome | None:
        if message.type is WSMsgType.BINARY:
            self.received.append({"binary_bytes": len(message.data)})
            await self.ws.send_bytes(message.data)
            return None
        if message.type is not WSMsgType.TEXT:
            return "disconnected"  # a protocol error or a lost connection
        event = decode_body(message.data.encode())
        self.received.append(event)
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            await self.error("invalid_event", "Events must be JSON objects with a string 'type'.", event)
            return None
        return await self.on_event(event)

    async def on_event(self, event: dict[str, Any]) -> Outcome | None:
        match event["type"]:
            case "session.update":
                await self.update_session(event)
            case "conversation.item.create":
                await self.create_item(event)
            case "response.create":
                return await self.respond(event)
            case kind if kind in IGNORED_EVENTS:
                pass
            case kind:
                await self.error("invalid_value", f"Invalid value: '{kind}'. Unknown event type.", event)
        return None

    async def update_session(self, event: dict[str, Any]) -> None:
        changes = event.get("session")
        if not isinstance(changes, dict):
            await self.error("invalid_value", "session.update needs a 'session' object.", event)
            return
        self.config.update({k: v for k, v in changes.items() if k not in ("id", "object", "model")})
        await self.send("session.updated", session=self.config)

    async def create_item(self, event: dict[str, Any]) -> None:
        item = event.get("item")
        if not isinstance(item, dict):
            await self.error("invalid_value", "conversation.item.create needs an 'item' object.", event)
            return
        item = {**item, "id": item.get("id") or self.new_id("item"), "object": "realtime.item",
                "status": "completed"}
        texts = item_texts(item)
        self.items.append(texts)
        self.pending.extend(texts)
        await self.send("conversation.item.created", previous_item_id=self.last_item_id, item=item)
        if self.dialect.item_done:
            await self.send("conversation.item.done", previous_item_id=self.last_item_id, item=item)
        self.last_item_id = item["id"]

    async def respond(self, event: dict[str, Any]) -> Outcome | None:
        """Stream one response; an Outcome when the session ends with it (close or drop)."""
        try:
            directives = parse_as(self.pending, NO_REALTIME_DIRECTIVES)
        except DirectiveError as exc:
            await self.error("invalid_directive", str(exc), event)
            return None
        self.pending = []
        options = event.get("response")
        if not isinstance(options, dict):
            options = {}
        return await Response(self, directives, options).stream()


class Response:
    """One response.create being answered."""

    def __init__(self, session: Session, directives: RealtimeDirectives, options: dict[str, Any]) -> None:
        self.session, self.directives = session, directives
        config, settings = session.config, session.settings
        wanted = settings.completion_tokens if directives.tokens is None else directives.tokens
        dialect = session.dialect
        limit = output_limit(options.get("max_output_tokens", config.get(dialect.max_tokens)))
        self.tokens = wanted if limit is None else min(wanted, limit)
        self.audio = "audio" in (options.get(dialect.modalities) or config.get(dialect.modalities) or ())
        tps = settings.tokens_per_second if directives.tps is None else directives.tps
        self.interval = 1 / tps if tps > 0 else 0.0
        self.id, self.item_id = session.new_id("resp"), session.new_id("item")
        self.where = {"response_id": self.id, "item_id": self.item_id, "output_index": 0, "content_index": 0}

    def item(self, status: str, content: list[dict[str, Any]]) -> dict[str, Any]:
        return {"id": self.item_id, "object": "realtime.item", "type": "message", "status": status,
                "role": "assistant", "content": content}

    def part(self, text: str) -> dict[str, Any]:
        dialect = self.session.dialect
        return {"type": dialect.audio_part, "transcript": text} if self.audio else {"type": dialect.text_part,
                                                                                   "text": text}

    async def stream(self) -> Outcome | None:
        session, cut = self.session, self.directives.cut
        input_tokens = count_prompt_tokens(session.items)
        await self.begin()
        if not await self.deltas(self.tokens if cut is None else min(cut, self.tokens)):
            return "disconnected"
        if self.directives.drop_after is not None:
            drop_connection(session.request)
            return "dropped"
        if self.directives.close_after is not None:
            await session.ws.close(code=WSCloseCode.OK, message=b"simulated close")
            return "completed"
        if self.directives.hang_after is None:
            report = usage(input_tokens, self.tokens, self.directives.cache_read or 0, self.audio)
            await self.finish(spoiled_usage(report, self.directives.usage, "input_tokens",
                                            ("input_token_details", "cached_tokens")))
        return None

    async def begin(self) -> None:
        send = self.session.send
        await send("response.created", response={"id": self.id, "object": "realtime.response",
                                                 "status": "in_progress", "status_details": None,
                                                 "output": [], "usage": None})
        await send("response.output_item.added", response_id=self.id, output_index=0,
                   item=self.item("in_progress", []))
        await send("response.content_part.added", **self.where, part=self.part(""))

    async def deltas(self, count: int) -> bool:
        """Send `count` token deltas, paced; False when the client left meanwhile."""
        for index, text in enumerate(iter_tokens(count)):
            if index and not await pace(self.session.request, self.interval):
                return False
            if self.audio:
                await self.session.send("response.audio.delta", **self.where, delta=AUDIO_CHUNK)
            kind = "response.audio_transcript.delta" if self.audio else "response.text.delta"
            await self.session.send(kind, **self.where, delta=text)
        return True

    async def finish(self, report: dict[str, Any]) -> None:
        session, text = self.session, completion_text(self.tokens)
        if self.audio:
            await session.send("response.audio.done", **self.where)
            await session.send("response.audio_transcript.done", **self.where, transcript=text)
        else:
            await session.send("response.text.done", **self.where, text=text)
        await session.send("response.content_part.done", **self.where, part=self.part(text))
        item = self.item("completed", [self.part(text)])
        await session.send("response.output_item.done", response_id=self.id, output_index=0, item=item)
        session.items.append([text])  # the answer is part of the conversation from now on
        await session.send("response.done", response={"id": self.id, "object": "realtime.response",
                                                       "status": "completed", "status_details": None,
                                                       "output": [item], "usage": report})


async def set_refusal(request: web.Request) -> web.Response:
    """POST /_sim/realtime: how later handshakes are answered (see the module docstring)."""
    try:
        refusal = msgspec.json.decode(await request.read() or b"{}", type=Refusal)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        return error_response(400, f"invalid realtime control: {exc}")
    request.app[CONTROL_KEY].refusal = refusal
    return web.Response(body=msgspec.json.encode(refusal), content_type="application/json")


def add_routes(app: web.Application) -> None:
    """Mount the realtime WebSocket route and its control route."""
    app[CONTROL_KEY] = Control()
    app.router.add_get(REALTIME_PATH, realtime)
    app.router.add_post(CONTROL_PATH, set_refusal)
