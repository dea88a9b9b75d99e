"""Chat on the Gemini route: ``POST /v1beta/models/{chat model}:generateContent`` and
``:streamGenerateContent?alt=sse``.

Order of behaviour for one request: validate (`gemini_wire.parse_chat_request`) ->
directives -> latency / hang -> simulated error status -> ``block=400`` -> (JSON)
drop / hang_after / generation time -> answer.

What the answer holds:

* Text: the `simulator.textgen` tokens, capped at ``generationConfig.maxOutputTokens``
  (finishReason MAX_TOKENS), one candidate per ``candidateCount``, all alike.
* A function call after the text, when ``[sim:tool=NAME]`` names a declared function or
  ``toolConfig`` mode ANY forces one (the first allowed name, else the first declared):
  ``args`` hold a sample value per property of its schema (`function_args`). finishReason
  stays STOP, as the real API reports it. No call when the token limit cut the text.
* ``[sim:finish=REASON]`` ends with that finishReason instead; ``[sim:block=prompt]`` answers
  promptFeedback.blockReason without candidates, ``[sim:block=candidate]`` a candidate stopped
  for SAFETY, ``[sim:block=400]`` a 400 (as on the music route).
* usageMetadata: promptTokenCount by the chat rule of `simulator.textgen` over the
  systemInstruction and each content (a function part counts the words of its name and
  compact JSON), plus what each inlineData part bills (`simulator.media_billing`); candidatesTokenCount is every
  candidate's tokens (FUNCTION_CALL_TOKENS per call); ``[sim:cached=N]`` and
  ``[sim:thoughts=N]`` add cachedContentTokenCount and thoughtsTokenCount.

The stream sends one event per text token, each with the running usageMetadata, then one
event with the function call if any, then a last event with an empty text part, the
finishReason and the full usage. A hostile provider's faults (`simulator.hostile`: usage,
malformed, bad_chunk, no_end) spoil the answer; a stream's broken events come after the
token events. drop_after / hang_after count token events. Without
``alt=sse`` the same events come back as one JSON array.
"""

import itertools
import uuid
from collections.abc import Iterable
from typing import Annotated, Any, Literal

import msgspec
import orjson
from aiohttp import web

from simulator import directives, hostile
from simulator.behaviour import abandoned, delay_headers, pace, stream_cut
from simulator.connection import drop_connection, wait_until_gone
from simulator.gemini_music import PROMPT_BLOCKED_MESSAGE
from simulator.gemini_wire import (
    ChatRequest,
    Content,
    FunctionCall,
    FunctionDeclaration,
    InvalidArgument,
    Part,
    error_response,
    generate_content_body,
    media_tokens,
    parse_chat_request,
    prompt_blocked_body,
    safety_stopped_candidate,
    simulated_error,
    text_part,
    usage_metadata,
)
from simulator.plan import Plan, make_plan
from simulator.recording import RECORD_KEY, Outcome
from simulator.settings import SETTINGS_KEY
from simulator.textgen import count_prompt_tokens, iter_chunks

CHAT_MODELS = frozenset({"gemini-2.5-flash", "gemini-2.5-pro", "gemini-2.5-flash-lite"})
FUNCTION_CALL_TOKENS = 8
SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
_SAMPLES = {"string": "the quick brown fox", "integer": 7, "number": 7, "boolean": True,
            "array": [], "object": {}}  # fmt: skip

FinishReason = Literal[
    "STOP", "MAX_TOKENS", "SAFETY", "RECITATION", "LANGUAGE", "OTHER", "BLOCKLIST",
    "PROHIBITED_CONTENT", "SPII", "MALFORMED_FUNCTION_CALL", "IMAGE_SAFETY",
]  # fmt: skip
NonNegative = Annotated[int, msgspec.Meta(ge=0)]


class GeminiChatDirectives(directives.Directives, frozen=True, forbid_unknown_fields=True):
    """The chat directives plus those of this route (None: not given); see the module docstring."""

    block: Literal["prompt", "candidate", "400"] | None = None
    finish: FinishReason | None = None
    tool: str | None = None
    cached: NonNegative | None = None
    thoughts: NonNegative | None = None


NO_DIRECTIVES = GeminiChatDirectives()


class Reply(msgspec.Struct, frozen=True):
    """What one answer says, shared by its JSON body and its events."""

    response_id: str
    model: str
    texts: list[str]  # the text tokens
    calls: list[dict[str, Any]]  # functionCall parts
    finish_reason: str
    count: int  # candidates, all alike
    prompt_tokens: int
    cached: int
    thoughts: int
    faults: hostile.HostileDirectives = hostile.NO_FAULTS

    @property
    def output_tokens(self) -> int:
        """candidatesTokenCount of the whole answer."""
        return self.count * (len(self.texts) + FUNCTION_CALL_TOKENS * len(self.calls))

    def body(self) -> dict[str, Any]:
        texts = [text_part("".join(self.texts))] if self.texts else []
        body = self._payload(texts + self.calls, self.finish_reason, self.output_tokens)
        return {**body, "candidates": hostile.MALFORMED} if self.faults.malformed else body

    def events(self) -> list[dict[str, Any]]:
        """The stream's events: one per text token, the calls, then the finish (none when the
        stream is to end without one)."""
        events = [self._payload([text_part(text)], None, self.count * sent)
                  for sent, text in enumerate(self.texts, 1)]
        if self.calls:
            events.append(self._payload(self.calls, None, self.output_tokens))
        finish = None if self.faults.no_end else self.finish_reason
        events.append(self._payload([text_part("")], finish, self.output_tokens))
        return events

    @property
    def broken_frames(self) -> list[bytes]:
        """The broken events a hostile stream sends before its last event."""
        return hostile.broken_frames(self.faults, sse_event({"candidates": hostile.MALFORMED}))

    def _payload(self, parts: list[dict[str, Any]], finish: str | None, tokens: int) -> dict[str, Any]:
        content = {"role": "model", "parts": parts}
        candidates = [{"content": content, **({"finishReason": finish} if finish else {}), "index": index}
                      for index in range(self.count)]
        usage = usage_metadata(self.prompt_tokens, tokens, cached=self.cached, thoughts=self.thoughts)
        usage = hostile.spoiled_usage(usage, self.faults.usage, "promptTokenCount", ("cachedContentTokenCount",))
        return {**generate_content_body(candidates, usage, self.model), "responseId": self.response_id}


class Answer(msgspec.Struct, frozen=True):
    """The JSON body of an answer, its stream events, and how many of those carry a token."""

    body: dict[str, Any]
    events: list[dict[str, Any]]
    token_events: int
    broken_frames: list[bytes] = []  # a hostile stream's, sent before its closing events


async def generate_content(request: web.Request, model: str) -> web.StreamResponse:
    """Serve one ``generateContent`` call of chat `model`."""
    return await _serve(request, model, stream=False)


async def stream_generate_content(request: web.Request, model: str) -> web.StreamResponse:
    """Serve one ``streamGenerateContent`` call of chat `model` (SSE with ``alt=sse``)."""
    return await _serve(request, model, stream=True)


async def _serve(request: web.Request, model: str, *, stream: bool) -> web.StreamResponse:
    try:
        chat, found = parse(request[RECORD_KEY].body)
        function = choose_function(chat, found)
    except InvalidArgument as exc:
        return error_response(400, str(exc))
    limit = chat.generation_config.max_output_tokens if chat.generation_config else None
    plan = make_plan(request.app[SETTINGS_KEY], found, limit)
    if not await delay_headers(request, plan):
        return abandoned(request, "disconnected")
    if plan.status is not None:
        return simulated_error(plan.status)
    if found.block == "400":
        return error_response(400, PROMPT_BLOCKED_MESSAGE)
    answer = compose(chat, found, plan, model, function)
    if stream and request.query.get("alt") == "sse":
        return await _stream(request, answer, plan)
    return await _respond_json(request, answer.events if stream else answer.body, answer, plan)


def parse(body: Any) -> tuple[ChatRequest, GeminiChatDirectives]:
    """The request and its directives (read from its text parts); raises InvalidArgument."""
    chat = parse_chat_request(body)
    texts = [part.text for content in _contents(chat) for part in content.parts if part.text]
    try:
        # The chat directive grammar, read into this route's schema.
        found = directives.parse_as(texts, NO_DIRECTIVES)
    except directives.DirectiveError as exc:
        raise InvalidArgument(str(exc)) from exc
    return chat, found


def choose_function(chat: ChatRequest, found: GeminiChatDirectives) -> FunctionDeclaration | None:
    """The declared function the answer calls, if any (see the module docstring)."""
    functions = {function.name: function for function in chat.functions}
    config = chat.tool_config.function_calling_config if chat.tool_config else None
    if found.tool is not None:
        if found.tool not in functions:
            raise InvalidArgument(f"[sim:tool={found.tool}] names no declared function")
        return functions[found.tool]
    if config is None or config.mode != "ANY" or not functions:
        return None
    allowed = config.allowed_function_names or list(functions)
    if allowed[0] not in functions:
        raise InvalidArgument(f"allowedFunctionNames names an undeclared function: {allowed[0]}")
    return functions[allowed[0]]


def compose(chat: ChatRequest, found: GeminiChatDirectives, plan: Plan, model: str,
            function: FunctionDeclaration | None) -> Answer:
    """The answer to `chat` under `plan`: a refusal when a block directive asks for one."""
    prompt_tokens = prompt_token_count(chat)
    if found.block is not None:
        no_output = usage_metadata(prompt_tokens, 0)
        body = (prompt_blocked_body(no_output, model) if found.block == "prompt"
                else generate_content_body([safety_stopped_candidate()], no_output, model))
        return Answer(body, [body], 0)
    calls = [] if function is None or plan.truncated else [function_call_part(function)]
    finish = found.finish or ("MAX_TOKENS" if plan.truncated else "STOP")
    count = (chat.generation_config.candidate_count if chat.generation_config else None) or 1
    reply = Reply(f"sim{uuid.uuid4().hex[:20]}", model, list(iter_chunks(plan.tokens, plan.chunk_bytes)), calls, finish,
                  count, prompt_tokens, min(found.cached or 0, prompt_tokens), found.thoughts or 0, found)
    return Answer(reply.body(), reply.events(), len(reply.texts), reply.broken_frames)


def prompt_token_count(chat: ChatRequest) -> int:
    """promptTokenCount of `chat` (see the module docstring)."""
    contents = _contents(chat)
    pieces = [list(itertools.chain.from_iterable(map(_part_texts, c.parts))) for c in contents]
    return count_prompt_tokens(pieces) + media_tokens(contents)


def _contents(chat: ChatRequest) -> list[Content]:
    return ([chat.system_instruction] if chat.system_instruction else []) + chat.contents


def _part_texts(part: Part) -> Iterable[str]:
    """The pieces of a part that count as prompt words."""
    if part.text is not None:
        return [part.text]
    function = part.function_call or part.function_response
    if function is None:
        return []
    value = function.args if isinstance(function, FunctionCall) else function.response
    return [function.name, orjson.dumps(value or {}).decode()]


def function_call_part(function: FunctionDeclaration) -> dict[str, Any]:
    return {"functionCall": {"name": function.name, "args": function_args(function.schema)}}


def function_args(schema: dict[str, Any]) -> dict[str, Any]:
    """A sample argument per property of a schema, chosen by its type (OpenAPI or JSON Schema)."""
    properties = schema.get("properties") or {}
    return {name: _SAMPLES.get(str(prop.get("type", "")).lower() if isinstance(prop, dict) else "", "the")
            for name, prop in properties.items()}


async def _respond_json(request: web.Request, payload: Any, answer: Answer, plan: Plan) -> web.StreamResponse:
    """Answer with one JSON body after the generation time, unless told to drop or hang."""
    if plan.drop_after is not None:
        drop_connection(request)
        return abandoned(request, "dropped")
    if plan.hang_after is not None:
        await wait_until_gone(request)  # a JSON body cannot be sent in part
        return abandoned(request, "disconnected")
    if not await pace(request, max(answer.token_events - 1, 0) * plan.token_interval_s):
        return abandoned(request, "disconnected")
    return web.Response(body=orjson.dumps(payload), content_type="application/json")


async def _stream(request: web.Request, answer: Answer, plan: Plan) -> web.StreamResponse:
    """Send the SSE stream; each event is written to the transport as soon as it is produced."""
    response = web.StreamResponse(headers=SSE_HEADERS)
    try:
        await response.prepare(request)
        outcome = await _send_events(request, response, answer, plan)
    except ConnectionError:  # a write after the client went away
        outcome = "disconnected"
    request[RECORD_KEY].settle(outcome)
    return response


async def _send_events(request: web.Request, response: web.StreamResponse, answer: Answer,
                       plan: Plan) -> Outcome:
    """Write the token events up to the stream's cut, paced; then cut, or finish the stream."""
    cut = stream_cut(plan)
    sent = answer.token_events if cut is None else min(cut, answer.token_events)
    for index, event in enumerate(answer.events[:sent]):
        if index and not await pace(request, plan.token_interval_s):
            return "disconnected"
        await response.write(sse_event(event))
    if plan.drop_after is not None:
        drop_connection(request)
        return "dropped"
    if plan.hang_after is not None:
        await wait_until_gone(request)
        return "disconnected"
    for frame in answer.broken_frames:
        await response.write(frame)
    for event in answer.events[answer.token_events:]:
        await response.write(sse_event(event))
    await response.write_eof()
    return "completed"


def sse_event(payload: dict[str, Any]) -> bytes:
    """One event as the Gemini API frames it (CRLF line ends)."""
    return b"data: " + orjson.dumps(payload) + b"\r\n\r\n"
