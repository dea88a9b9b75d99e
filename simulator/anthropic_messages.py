"""POST /v1/messages: Anthropic's Messages API, as JSON or as its SSE event sequence.

Order of behaviour for one request: ``anthropic-version`` header -> validate ->
directives -> latency / hang -> simulated error status -> (non-stream) drop / hang_after /
error_after / generation time -> response. Credentials (``x-api-key``) are checked
before any of this by `simulator.auth`.

What the answer holds:

* Text: the `simulator.textgen` tokens, capped at ``max_tokens`` (stop reason
  ``max_tokens``), cut before the first of ``stop_sequences`` it contains (stop reason
  ``stop_sequence``, the rest of the text is not generated).
* A tool call, when the request has tools and ``[sim:tool=NAME]`` names one of them,
  or ``tool_choice`` forces one (``tool``: that tool, ``any``: the first): a
  ``tool_use`` block after the text, whose input has a sample value per property of
  the tool's input schema (`tool_input`); it is streamed as ``input_json_delta``
  fragments of FRAGMENT_CHARS characters (`json_fragments`), one output token each.
  Stop reason ``tool_use``. ``[sim:refusal]`` answers stop reason ``refusal`` instead.
* Usage: see `simulator.anthropic_wire`; ``[sim:cache_read=N]``, ``[sim:cache_write=N]`` (a
  five-minute write) and ``[sim:cache_write_1h=N]`` (a one-hour write) move N prompt tokens into
  the cache fields. ``usage.service_tier`` is "standard" (this simulator has no priority capacity
  for "auto" to use) unless ``[sim:served_tier=NAME]`` reports another.

Stream events: message_start, ping, then per block content_block_start,
content_block_delta*, content_block_stop, then message_delta, message_stop.
``[sim:error_after=K]`` sends K deltas and then an ``error`` event (overloaded_error);
without streaming it answers 529. drop_after / hang_after count deltas the same way.
A hostile provider's faults (`simulator.hostile`: usage, malformed, bad_chunk, no_end) spoil
the answer; a stream's broken events come after its content blocks, before message_delta.
"""

import itertools
import uuid
from collections.abc import Iterator
from typing import Annotated, Any, Literal

import msgspec
import orjson
from aiohttp import web

from simulator import anthropic_wire as wire
from simulator import directives, hostile
from simulator.behaviour import abandoned, delay_headers, pace
from simulator.connection import drop_connection, wait_until_gone
from simulator.plan import Plan, generation_time, make_plan
from simulator.recording import RECORD_KEY, Outcome
from simulator.settings import SETTINGS_KEY, Settings
from simulator.textgen import iter_tokens

MESSAGES_PATH = "/v1/messages"
FRAGMENT_CHARS = 8
OVERLOADED = 529
Kind = Literal["frame", "delta", "close"]  # of a stream frame; stream cuts count the deltas


class AnthropicDirectives(directives.Directives, frozen=True, forbid_unknown_fields=True):
    """The chat directives plus those of this route (None / False: not given).

    tool: answer with a call of this tool (it must be among the request's tools).
    cache_read / cache_write / cache_write_1h: report this many prompt tokens as read from /
        written to the prompt cache (for five minutes / for an hour).
    served_tier: report this ``usage.service_tier`` (as an upstream serving another tier does).
    refusal: stop with stop reason ``refusal``.
    error_after: (stream) send K deltas, then an ``error`` event; (non-stream) answer 529.
    """

    tool: str | None = None
    cache_read: Annotated[int, msgspec.Meta(ge=0)] | None = None
    cache_write: Annotated[int, msgspec.Meta(ge=0)] | None = None
    cache_write_1h: Annotated[int, msgspec.Meta(ge=0)] | None = None
    served_tier: str | None = None
    refusal: bool = False
    error_after: Annotated[int, msgspec.Meta(ge=0)] | None = None


NO_DIRECTIVES = AnthropicDirectives()


class ToolCall(msgspec.Struct, frozen=True):
    id: str
    name: str
    input: dict[str, Any]

    @property
    def fragments(self) -> list[str]:
        return json_fragments(self.input)


class Reply(msgspec.Struct, frozen=True):
    """What one answer says, shared by its JSON body and its event stream."""

    message_id: str
    model: str
    texts: list[str]  # the text tokens, after any stop sequence cut
    tool: ToolCall | None
    stop_reason: str
    stop_sequence: str | None
    prompt_tokens: int
    cache_read: int
    cache_write: int  # five-minute writes
    cache_write_1h: int = 0
    service_tier: str = "standard"
    faults: hostile.HostileDirectives = hostile.NO_FAULTS

    @property
    def output_tokens(self) -> int:
        return len(self.texts) + (len(self.tool.fragments) if self.tool else 0)

    def usage(self, output_tokens: int) -> dict[str, Any]:
        input_tokens = self.prompt_tokens - self.cache_read - self.cache_write - self.cache_write_1h
        usage = wire.usage_body(input_tokens, output_tokens, self.cache_write, self.cache_read, self.cache_write_1h,
                                self.service_tier)
        if self.faults.usage == "cached_over":  # cache counts are apart from input_tokens here
            return {**usage, "input_tokens": -10, "cache_read_input_tokens": self.prompt_tokens + 10}
        return hostile.spoiled_usage(usage, self.faults.usage, "input_tokens")

    def body(self) -> dict[str, Any]:
        content = [wire.text_block("".join(self.texts))] if self.texts else []
        if self.tool:
            content.append(wire.tool_use_block(self.tool.id, self.tool.name, self.tool.input))
        body = wire.message_body(self.message_id, self.model, content, self.stop_reason,
                                 self.stop_sequence, self.usage(self.output_tokens))
        return {**body, "content": hostile.MALFORMED} if self.faults.malformed else body


def tool_input(schema: dict[str, Any]) -> dict[str, Any]:
    """A sample input for a tool: one value per property of its schema, chosen by type."""
    properties = schema.get("properties") or {}
    return {name: _sample(prop.get("type") if isinstance(prop, dict) else None)
            for name, prop in properties.items()}


def _sample(json_type: str | None) -> Any:
    samples = {"string": "the quick brown fox", "integer": 7, "number": 7, "boolean": True,
               "array": [], "object": {}}  # fmt: skip
    return samples.get(json_type or "", "the")


def json_fragments(value: dict[str, Any]) -> list[str]:
    """The ``partial_json`` pieces a tool input is streamed in."""
    text = orjson.dumps(value).decode()
    return [text[i:i + FRAGMENT_CHARS] for i in range(0, len(text), FRAGMENT_CHARS)]


def cut_at_stop(tokens: list[str], stops: list[str]) -> tuple[list[str], str | None]:
    """The tokens up to the first stop sequence in their text (which is not sent), and it."""
    hit = _first_stop("".join(tokens), stops)
    if hit is None:
        return tokens, None
    position, stop = hit
    kept: list[str] = []
    length = 0
    for token in tokens:
        if length + len(token) >= position:
            head = token[:position - length]
            return kept + ([head] if head else []), stop
        kept.append(token)
        length += len(token)
    return kept, stop


def _first_stop(text: str, stops: list[str]) -> tuple[int, str] | None:
    found = [(text.find(stop), stop) for stop in stops if stop and stop in text]
    return min(found) if found else None


async def create_message(request: web.Request) -> web.StreamResponse:
    """Serve one Messages request according to settings and in-prompt directives."""
    if not request.headers.get("anthropic-version"):
        return wire.error_response(400, "anthropic-version: header is required")
    return await answer(request, request[RECORD_KEY].body)


async def answer(request: web.Request, body: Any) -> web.StreamResponse:
    """Answer the Messages request `body` (decoded JSON) as Anthropic does, JSON or stream."""
    try:
        parsed, found = parse(body)
        tool = choose_tool(parsed, found)
    except wire.BadRequest as exc:
        return wire.error_response(400, str(exc))
    plan = make_plan(request.app[SETTINGS_KEY], found, parsed.max_tokens)
    if not await delay_headers(request, plan):
        return abandoned(request, "disconnected")
    if plan.status is not None:
        return simulated_error(plan.status)
    reply = compose(parsed, found, plan, tool)
    if parsed.stream:
        return await _stream(request, reply, plan, found.error_after)
    return await _respond_json(request, reply, plan, found.error_after)


def json_answer(settings: Settings, body: Any, tier: str = "standard") -> tuple[int, dict[str, Any]]:
    """The status and JSON body that answer `body` unstreamed, without the timing directives (they
    belong to a connection): how a batch request is answered, `tier` the service tier it reports
    unless ``[sim:served_tier=NAME]`` says otherwise."""
    try:
        parsed, found = parse(body)
        tool = choose_tool(parsed, found)
    except wire.BadRequest as exc:
        return 400, wire.error_body(400, str(exc))
    plan = make_plan(settings, found, parsed.max_tokens)
    if plan.status is not None:
        return plan.status, wire.error_body(plan.status, f"simulated error {plan.status}")
    if found.error_after is not None:
        return OVERLOADED, wire.error_body(OVERLOADED, "Overloaded")
    return 200, compose(parsed, found, plan, tool, tier).body()


def parse(body: Any) -> tuple[wire.MessagesRequest, AnthropicDirectives]:
    """The request and its directives; raises BadRequest."""
    parsed = wire.parse_messages_request(body)
    texts = itertools.chain.from_iterable(wire.request_texts(parsed))
    try:
        # The chat directive grammar, read into this route's schema.
        found = directives.parse_as(texts, NO_DIRECTIVES)
    except directives.DirectiveError as exc:
        raise wire.BadRequest(str(exc)) from exc
    return parsed, found


def choose_tool(parsed: wire.MessagesRequest, found: AnthropicDirectives) -> wire.Tool | None:
    """The tool the answer calls, if any (see the module docstring)."""
    tools, choice = parsed.tools or [], parsed.tool_choice
    if isinstance(choice, wire.NoneChoice):
        return None
    name = found.tool or (choice.name if isinstance(choice, wire.ToolChoiceByName) else None)
    if name is None:
        return tools[0] if tools and isinstance(choice, wire.AnyChoice) else None
    tool = next((t for t in tools if t.name == name), None)
    if tool is None:
        raise wire.BadRequest(f"tool {name!r} is not among the request's tools")
    return tool


def compose(parsed: wire.MessagesRequest, found: AnthropicDirectives, plan: Plan,
            tool: wire.Tool | None, tier: str = "standard") -> Reply:
    """The answer to `parsed` under `plan`, reporting service tier `tier` unless a directive names another."""
    texts, stop = cut_at_stop(list(iter_tokens(plan.tokens)), parsed.stop_sequences or [])
    stop_reason = _stop_reason(stop, plan.truncated, found.refusal, tool is not None)
    call = None
    if stop_reason == "tool_use" and tool is not None:  # tool_use comes only with a tool
        call_id = f"toolu_sim_{uuid.uuid4().hex[:24]}"
        call = ToolCall(call_id, tool.name, tool_input(tool.input_schema))
    prompt_tokens = wire.prompt_tokens(parsed)
    cache_read = min(found.cache_read or 0, prompt_tokens)
    cache_write = min(found.cache_write or 0, prompt_tokens - cache_read)
    cache_write_1h = min(found.cache_write_1h or 0, prompt_tokens - cache_read - cache_write)
    return Reply(f"msg_sim_{uuid.uuid4().hex[:24]}", parsed.model, texts, call, stop_reason,
                 stop, prompt_tokens, cache_read, cache_write, cache_write_1h, found.served_tier or tier, found)


def _stop_reason(stop: str | None, truncated: bool, refusal: bool, tool: bool) -> str:
    if stop is not None:
        return "stop_sequence"
    if truncated:
        return "max_tokens"
    if refusal:
        return "refusal"
    return "tool_use" if tool else "end_turn"


def simulated_error(status: int) -> web.Response:
    """The error a ``[sim:status=CODE]`` directive asks for (429 adds ``retry-after: 1``)."""
    headers = {"retry-after": "1"} if status == 429 else None
    return wire.error_response(status, f"simulated error {status}", headers=headers)


async def _respond_json(request: web.Request, reply: Reply, plan: Plan,
                        error_after: int | None) -> web.StreamResponse:
    """Answer with one JSON body after the generation time, unless told otherwise."""
    if plan.drop_after is not None:
        drop_connection(request)
        return abandoned(request, "dropped")
    if plan.hang_after is not None:
        await wait_until_gone(request)  # a JSON body cannot be sent in part
        return abandoned(request, "disconnected")
    if error_after is not None:
        return wire.error_response(OVERLOADED, "Overloaded")
    if not await pace(request, generation_time(plan)):
        return abandoned(request, "disconnected")
    return wire.json_response(reply.body())


async def _stream(request: web.Request, reply: Reply, plan: Plan,
                  error_after: int | None) -> web.StreamResponse:
    """Send the event stream; each event is written as soon as it is produced."""
    headers = {**wire.SSE_HEADERS, "request-id": wire.new_request_id()}
    response = web.StreamResponse(headers=headers)
    try:
        await response.prepare(request)
        outcome = await _send_events(request, response, reply, plan, error_after)
    except ConnectionError:  # a write after the client went away
        outcome = "disconnected"
    request[RECORD_KEY].settle(outcome)
    return response


async def _send_events(request: web.Request, response: web.StreamResponse, reply: Reply,
                       plan: Plan, error_after: int | None) -> Outcome:
    """Write the events of `reply` in order; the outcome tells how the stream ended."""
    cut = _first_cut(plan, error_after)
    sent = 0
    for frame, kind in _events(reply):
        if cut is not None and (kind == "close" or (kind == "delta" and sent == cut)):
            return await _cut(request, response, plan, error_after)
        if kind == "delta" and sent and not await pace(request, plan.token_interval_s):
            return "disconnected"
        await response.write(frame)
        sent += kind == "delta"
    await response.write_eof()
    return "completed"


def _first_cut(plan: Plan, error_after: int | None) -> int | None:
    cuts = [k for k in (plan.drop_after, plan.hang_after, error_after) if k is not None]
    return min(cuts) if cuts else None


async def _cut(request: web.Request, response: web.StreamResponse, plan: Plan,
               error_after: int | None) -> Outcome:
    """End a stream early the way its directives say (drop wins over error, error over hang)."""
    if plan.drop_after is not None:
        drop_connection(request)
        return "dropped"
    if error_after is not None:
        await response.write(wire.error_event(OVERLOADED, "Overloaded"))
        await response.write_eof()
        return "completed"
    await wait_until_gone(request)
    return "disconnected"


def _events(reply: Reply) -> Iterator[tuple[bytes, Kind]]:
    """Every frame of the stream with its kind: a content delta, the closing delta, or other."""
    shell = wire.message_body(reply.message_id, reply.model, [], None, None, reply.usage(1))
    yield wire.event("message_start", message=shell), "frame"
    yield wire.event("ping"), "frame"
    index = 0
    if reply.texts:
        yield wire.event("content_block_start", index=0, content_block=wire.text_block("")), "frame"
        yield from ((wire.text_delta(0, text), "delta") for text in reply.texts)
        yield wire.event("content_block_stop", index=0), "frame"
        index = 1
    if reply.tool:
        yield from _tool_events(index, reply.tool)
    malformed = wire.event("content_block_delta", index=0, delta=hostile.MALFORMED)
    yield from ((frame, "frame") for frame in hostile.broken_frames(reply.faults, malformed))
    yield wire.message_delta(reply.stop_reason, reply.stop_sequence, reply.output_tokens), "close"
    if not reply.faults.no_end:
        yield wire.event("message_stop"), "frame"


def _tool_events(index: int, tool: ToolCall) -> Iterator[tuple[bytes, Kind]]:
    block = wire.tool_use_block(tool.id, tool.name, {})
    yield wire.event("content_block_start", index=index, content_block=block), "frame"
    yield wire.json_delta(index, ""), "frame"  # the API opens every tool input with an empty piece
    yield from ((wire.json_delta(index, piece), "delta") for piece in tool.fragments)
    yield wire.event("content_block_stop", index=index), "frame"


def add_routes(app: web.Application) -> None:
    """Mount the Anthropic Messages route."""
    app.router.add_post(MESSAGES_PATH, create_message)
