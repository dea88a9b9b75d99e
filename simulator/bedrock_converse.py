"""POST /model/{modelId}/converse and /converse-stream: Bedrock's Converse API, as one JSON body
or as AWS's binary event stream (`simulator.bedrock_eventstream`).

Order of behaviour for one request (credentials and the model id are checked before, by
`simulator.bedrock_access`): validate -> directives -> latency / hang -> simulated error ->
(non-stream) drop / hang_after / error_after / generation time -> response.

What the answer holds (the rules of `simulator.anthropic_messages`, in Bedrock's shapes):

* Text: the `simulator.textgen` tokens, capped at ``inferenceConfig.maxTokens`` (stopReason
  ``max_tokens``), cut before the first of ``stopSequences`` it contains (``stop_sequence``).
* A tool call when ``toolConfig.toolChoice`` forces one (``tool``: that tool, ``any``: the
  first) or ``[sim:tool=NAME]`` names one: a ``toolUse`` block after the text whose input has a
  sample value per schema property; streamed as JSON fragments, one output token each.
* Usage: see `simulator.bedrock_wire`; ``[sim:cache_read=N]`` / ``[sim:cache_write=N]`` /
  ``[sim:cache_write_1h=N]`` move N prompt tokens out of inputTokens into the cache fields (the
  writes of five minutes and of an hour, told apart in ``cacheDetails``).
* ``serviceTier``: the request's, echoed (absent when it names none), unless
  ``[sim:served_tier=NAME]`` reports another (as when priority capacity is full).

Stream events: messageStart, then contentBlockDelta* and contentBlockStop for the text (index
0; Bedrock sends no contentBlockStart for text), contentBlockStart / Delta* / Stop for a tool
call, then messageStop and metadata (the stream's only usage) last. ``[sim:error_after=K]``
sends K deltas and then an exception message (``[sim:stream_exception=NAME]``, default
modelStreamErrorException); without streaming it answers that exception's HTTP error.
drop_after / hang_after count deltas the same way. Hostile faults (`simulator.hostile`) spoil
the usage, the body or the stream (no_end: neither messageStop nor metadata is sent).
"""

import itertools
import secrets
import time
from types import MappingProxyType
from collections.abc import Awaitable, Callable, Iterator
from typing import Annotated, Any, Literal

import msgspec
from aiohttp import web

from simulator import bedrock_eventstream as eventstream
from simulator import bedrock_wire as wire
from simulator import directives, hostile
from simulator.anthropic_messages import cut_at_stop, json_fragments, tool_input
from simulator.behaviour import abandoned, delay_headers, pace
from simulator.connection import drop_connection, wait_until_gone
from simulator.plan import Plan, generation_time, make_plan
from simulator.recording import RECORD_KEY, Outcome
from simulator.settings import SETTINGS_KEY
from simulator.textgen import iter_tokens

StreamException = Literal["throttlingException", "modelStreamErrorException", "internalServerException",
                          "serviceUnavailableException", "validationException"]
Kind = Literal["frame", "delta", "close"]  # of a stream message; stream cuts count the deltas
# The HTTP error a non-streamed answer fails with in place of a stream exception.
HTTP_EQUIVALENT = MappingProxyType({"modelStreamErrorException": "ModelErrorException"})
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class BedrockDirectives(directives.Directives, frozen=True, forbid_unknown_fields=True):
    """The chat directives plus Bedrock's (None / False: not given).

    tool: answer with a call of this tool (it must be among the request's tools).
    cache_write / cache_write_1h: report this many prompt tokens as written to the prompt cache
        for five minutes / for an hour.
    served_tier: report this serviceTier type as the one served, whatever was asked.
    error_after: (stream) send K deltas, then an exception message; (non-stream) its HTTP error.
    stream_exception: the ``:exception-type`` of that message (default modelStreamErrorException).
    aws_error: answer with this AWS error by name, at the status AWS gives it
        (e.g. ModelNotReadyException: 429).
    stop_reason: end with stopReason content_filtered or guardrail_intervened (text still sent).
    """

    tool: str | None = None
    cache_write: Annotated[int, msgspec.Meta(ge=0)] | None = None
    cache_write_1h: Annotated[int, msgspec.Meta(ge=0)] | None = None
    served_tier: str | None = None
    error_after: Annotated[int, msgspec.Meta(ge=0)] | None = None
    stream_exception: StreamException = "modelStreamErrorException"
    aws_error: str | None = None
    stop_reason: Literal["content_filtered", "guardrail_intervened"] | None = None


NO_DIRECTIVES = BedrockDirectives()


class ToolCall(msgspec.Struct, frozen=True):
    id: str
    name: str
    input: dict[str, Any]


class Reply(msgspec.Struct, frozen=True):
    """What one answer says, shared by its JSON body and its event stream."""

    texts: list[str]
    tool: ToolCall | None
    stop_reason: str
    prompt_tokens: int
    cache_read: int
    cache_write: int  # five-minute writes
    cache_write_1h: int = 0
    service_tier: str | None = None  # the serviceTier type reported (None: no serviceTier sent)
    faults: hostile.HostileDirectives = hostile.NO_FAULTS

    @property
    def fragments(self) -> list[str]:
        return json_fragments(self.tool.input) if self.tool else []

    @property
    def output_tokens(self) -> int:
        return len(self.texts) + len(self.fragments)

    def usage(self) -> dict[str, Any]:
        input_tokens = self.prompt_tokens - self.cache_read - self.cache_write - self.cache_write_1h
        usage = wire.usage_body(input_tokens, self.output_tokens, self.cache_read, self.cache_write,
                                self.cache_write_1h)
        return hostile.spoiled_usage(usage, self.faults.usage, "inputTokens", ("cacheReadInputTokens",))

    def body(self, latency_ms: int) -> dict[str, Any]:
        content: list[dict[str, Any]] = [{"text": "".join(self.texts)}] if self.texts else []
        if self.tool:
            content.append({"toolUse": {"toolUseId": self.tool.id, "name": self.tool.name, "input": self.tool.input}})
        message = {"role": "assistant", "content": hostile.MALFORMED if self.faults.malformed else content}
        return {"output": {"message": message}, "stopReason": self.stop_reason, "usage": self.usage(),
                "metrics": {"latencyMs": latency_ms}, **self.tier()}

    def tier(self) -> dict[str, Any]:
        """The answer's (or the metadata event's) ``serviceTier`` field, when it has one."""
        return {} if self.service_tier is None else {"serviceTier": {"type": self.service_tier}}


def parse(body: Any) -> tuple[wire.ConverseRequest, BedrockDirectives]:
    """The request and its directives; raises BadRequest."""
    parsed = wire.parse_converse(body)
    try:
        found = directives.parse_as(itertools.chain.from_iterable(wire.request_texts(parsed)), NO_DIRECTIVES)
    except directives.DirectiveError as exc:
        raise wire.BadRequest(str(exc)) from exc
    if found.aws_error is not None and found.aws_error not in wire.ERROR_STATUSES:
        raise wire.BadRequest(f"invalid simulator directive: unknown aws_error {found.aws_error!r}")
    return parsed, found


def choose_tool(parsed: wire.ConverseRequest, found: BedrockDirectives) -> wire.ToolSpec | None:
    """The tool the answer calls, if any (see the module docstring)."""
    tools = parsed.tool_specs
    choice = parsed.toolConfig.toolChoice if parsed.toolConfig else None
    name = found.tool or (choice.tool.get("name") if choice and choice.tool else None)
    if name is None:
        return tools[0] if tools and choice and choice.any is not None else None
    tool = next((spec for spec in tools if spec.name == name), None)
    if tool is None:
        raise wire.BadRequest(f"The tool {name!r} is not among the request's tools.")
    return tool


def compose(parsed: wire.ConverseRequest, found: BedrockDirectives, plan: Plan,
            tool: wire.ToolSpec | None) -> Reply:
    """The answer to `parsed` under `plan`."""
    texts, stop = cut_at_stop(list(iter_tokens(plan.tokens)), parsed.stop_sequences)
    stop_reason = ("stop_sequence" if stop is not None else "max_tokens" if plan.truncated
                   else found.stop_reason or ("tool_use" if tool else "end_turn"))
    call = None
    if stop_reason == "tool_use" and tool is not None:
        schema = tool.inputSchema.get("json")
        call = ToolCall(f"tooluse_{secrets.token_urlsafe(16)}", tool.name,
                        tool_input(schema if isinstance(schema, dict) else {}))
    prompt_tokens = wire.prompt_tokens(parsed)
    cache_read = min(found.cache_read or 0, prompt_tokens)
    cache_write = min(found.cache_write or 0, prompt_tokens - cache_read)
    cache_write_1h = min(found.cache_write_1h or 0, prompt_tokens - cache_read - cache_write)
    served = found.served_tier or (parsed.serviceTier.type if parsed.serviceTier else None)
    return Reply(texts, call, stop_reason, prompt_tokens, cache_read, cache_write, cache_write_1h, served, found)


def failure(found: BedrockDirectives) -> web.Response:
    """The HTTP error standing in for a stream exception in a non-streamed answer."""
    exception = found.stream_exception
    name = HTTP_EQUIVALENT.get(exception, exception[0].upper() + exception[1:])
    return wire.named_error(name, "The model failed while generating its answer (simulated).")


def converse_handler(stream: bool) -> Handler:
    """The handler of Converse (`stream` False) or ConverseStream (True)."""
    async def converse(request: web.Request) -> web.StreamResponse:
        started = time.monotonic()
        try:
            parsed, found = parse(request[RECORD_KEY].body)
            tool = choose_tool(parsed, found)
        except wire.BadRequest as exc:
            return wire.error_response(400, "ValidationException", str(exc))
        plan = make_plan(request.app[SETTINGS_KEY], found, parsed.max_tokens)
        if not await delay_headers(request, plan):
            return abandoned(request, "disconnected")
        if found.aws_error is not None:
            return wire.named_error(found.aws_error)
        if plan.status is not None:
            return wire.status_error(plan.status)
        reply = compose(parsed, found, plan, tool)
        if stream:
            return await _stream(request, reply, plan, found, started)
        return await _respond_json(request, reply, plan, found, started)
    return converse


def _elapsed_ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


async def _respond_json(request: web.Request, reply: Reply, plan: Plan, found: BedrockDirectives,
                        started: float) -> web.StreamResponse:
    """Answer with one JSON body after the generation time, unless told otherwise."""
    if plan.drop_after is not None:
        drop_connection(request)
        return abandoned(request, "dropped")
    if plan.hang_after is not None:
        await wait_until_gone(request)  # a JSON body cannot be sent in part
        return abandoned(request, "disconnected")
    if found.error_after is not None:
        return failure(found)
    if not await pace(request, generation_time(plan)):
        return abandoned(request, "disconnected")
    return wire.json_response(reply.body(_elapsed_ms(started)))


async def _stream(request: web.Request, reply: Reply, plan: Plan, found: BedrockDirectives,
                  started: float) -> web.StreamResponse:
    """Send the event stream; each message is written as soon as it is produced."""
    headers = {"Content-Type": eventstream.CONTENT_TYPE, "x-amzn-RequestId": wire.new_request_id()}
    response = web.StreamResponse(headers=headers)
    try:
        await response.prepare(request)
        outcome = await _send_events(request, response, reply, plan, found, started)
    except ConnectionError:  # a write after the client went away
        outcome = "disconnected"
    request[RECORD_KEY].settle(outcome)
    return response


async def _send_events(request: web.Request, response: web.StreamResponse, reply: Reply, plan: Plan,
                       found: BedrockDirectives, started: float) -> Outcome:
    """Write the messages of `reply` in order; the outcome tells how the stream ended."""
    cuts = [k for k in (plan.drop_after, plan.hang_after, found.error_after) if k is not None]
    cut = min(cuts) if cuts else None
    sent = 0
    for kind, make in _events(reply, started):
        if cut is not None and (kind == "close" or (kind == "delta" and sent == cut)):
            return await _cut(request, response, plan, found)
        if kind == "delta" and sent and not await pace(request, plan.token_interval_s):
            return "disconnected"
        await response.write(make())
        sent += kind == "delta"
    await response.write_eof()
    return "completed"


async def _cut(request: web.Request, response: web.StreamResponse, plan: Plan,
               found: BedrockDirectives) -> Outcome:
    """End a stream early the way its directives say (drop wins over error, error over hang)."""
    if plan.drop_after is not None:
        drop_connection(request)
        return "dropped"
    if found.error_after is not None:
        message = "The model failed while streaming its answer (simulated)."
        await response.write(eventstream.exception(found.stream_exception, message))
        await response.write_eof()
        return "completed"
    await wait_until_gone(request)
    return "disconnected"


Maker = Callable[[], bytes]  # gives a message's bytes, made when it is sent


def _events(reply: Reply, started: float) -> Iterator[tuple[Kind, Maker]]:
    """Every message of the stream with its kind. Each is built only when sent, so the
    metadata's latencyMs measures the stream as it went."""
    yield "frame", lambda: eventstream.event("messageStart", {"role": "assistant"})
    index = 0
    if reply.texts:
        for text in reply.texts:
            yield "delta", _maker("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": text}})
        yield "frame", _maker("contentBlockStop", {"contentBlockIndex": 0})
        index = 1
    if reply.tool:
        yield from _tool_events(index, reply.tool, reply.fragments)
    yield from _broken_events(reply.faults)
    if reply.faults.no_end:
        yield "close", lambda: b""
        return
    yield "close", _maker("messageStop", {"stopReason": reply.stop_reason})
    yield "frame", lambda: eventstream.event("metadata", {"usage": reply.usage(), **reply.tier(),
                                                          "metrics": {"latencyMs": _elapsed_ms(started)}})


def _maker(event_type: str, payload: dict[str, Any]) -> Maker:
    return lambda: eventstream.event(event_type, payload)


def _tool_events(index: int, tool: ToolCall, fragments: list[str]) -> Iterator[tuple[Kind, Maker]]:
    start = {"toolUse": {"toolUseId": tool.id, "name": tool.name}}
    yield "frame", _maker("contentBlockStart", {"contentBlockIndex": index, "start": start})
    for piece in fragments:
        yield "delta", _maker("contentBlockDelta", {"contentBlockIndex": index, "delta": {"toolUse": {"input": piece}}})
    yield "frame", _maker("contentBlockStop", {"contentBlockIndex": index})


def _broken_events(faults: hostile.HostileDirectives) -> Iterator[tuple[Kind, Maker]]:
    """A hostile stream's broken messages: a delta of the wrong shape, a payload that is not JSON."""
    if faults.malformed:
        yield "frame", _maker("contentBlockDelta", {"contentBlockIndex": 0, "delta": hostile.MALFORMED})
    if faults.bad_chunk:
        headers = {":event-type": "contentBlockDelta", ":content-type": "application/json", ":message-type": "event"}
        yield "frame", lambda: eventstream.encode_message(headers, b"{not json")
