"""POST /v1/responses: OpenAI's Responses API, as JSON or as an SSE stream of named events.

The text, token counts and directives are chat's (`simulator.openai_chat`, `simulator.textgen`):
each input item counts as a message (instructions as one more); ``[sim:tool=NAME]`` answers with
a call of that declared function after the text (unless the input ends with a function's output:
then the model has its answer, as an agent's second turn expects) (its arguments a sample per schema property, as
the Anthropic route makes them). A stream sends response.created, response.in_progress, the
message item's added events, one output_text.delta per token, its done events, the function call's
events, then response.completed (or response.incomplete when max_output_tokens cut the text)
with the usage and the `service_tier` served (chat's rule, `openai_wire.served_tier`); every
event numbered by `sequence_number`. drop_after / hang_after count
text deltas. There is no `[DONE]`: the real API sends none.

`previous_response_id` is refused: this provider never issued the gateway's ids, so a gateway that
forwards one has leaked its own state upstream.
"""

import itertools
import time
import uuid
from typing import Any, Literal

import msgspec
import orjson
from aiohttp import web

from simulator.anthropic_messages import tool_input
from simulator.behaviour import abandoned, delay_headers, pace, stream_cut
from simulator.connection import drop_connection, wait_until_gone
from simulator.directives import DirectiveError, parse_as
from simulator.openai_chat import respond_json, simulated_error, simulated_error_body
from simulator.openai_wire import SSE_HEADERS, JsonAnswer, OpenAIDirectives, ServiceTier, error_body, error_response, \
    served_tier
from simulator.media_billing import openai_media_tokens
from simulator.plan import Plan, make_plan
from simulator.recording import RECORD_KEY, Outcome
from simulator.settings import SETTINGS_KEY, Settings
from simulator.textgen import completion_text, count_prompt_tokens, iter_tokens

RESPONSES_PATH = "/v1/responses"


class ResponsesDirectives(OpenAIDirectives, frozen=True, forbid_unknown_fields=True):
    """Chat's directives (served_tier included), plus `tool`: answer with a call of this declared function."""

    tool: str | None = None


NO_DIRECTIVES = ResponsesDirectives()


class ResponsesRequest(msgspec.Struct):
    model: str
    input: str | list[dict[str, Any]]
    instructions: str | None = None
    tools: list[dict[str, Any]] = []
    max_output_tokens: int | None = None
    stream: bool = False
    previous_response_id: str | None = None
    service_tier: ServiceTier | Literal["ultrafast"] | None = None


class BadRequest(ValueError):
    """A request the real API would reject with 400; the message says why."""


def item_texts(item: dict[str, Any]) -> list[str]:
    """The text pieces of one input item (a message's text parts, a call's arguments or output)."""
    content = item.get("content")
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [part.get("text") or "" for part in content if isinstance(part, dict)]
    return [str(item.get("arguments") or item.get("output") or "")]


def parse(body: Any) -> tuple[ResponsesRequest, list[list[str]], ResponsesDirectives]:
    """The request, the text pieces of each input item, and its directives; raises BadRequest."""
    try:
        request = msgspec.convert(body, ResponsesRequest)
    except msgspec.ValidationError as exc:
        raise BadRequest(f"Invalid response request: {exc}") from exc
    if request.previous_response_id is not None:
        raise BadRequest(f"Previous response with id '{request.previous_response_id}' not found.")
    items = [{"content": request.input}] if isinstance(request.input, str) else request.input
    texts = [item_texts(item) for item in items] + ([[request.instructions]] if request.instructions else [])
    try:
        directives = parse_as(itertools.chain.from_iterable(texts), NO_DIRECTIVES)
    except DirectiveError as exc:
        raise BadRequest(str(exc)) from exc
    if directives.tool is not None and directives.tool not in {t.get("name") for t in request.tools}:
        raise BadRequest(f"[sim:tool={directives.tool}] names no declared function")
    if items and items[-1].get("type") == "function_call_output":  # answered: the model now says so in text
        directives = msgspec.structs.replace(directives, tool=None)
    return request, texts, directives


class Answer:
    """One response: its ids, plan, output items and usage, for its JSON body or its events."""

    def __init__(self, request: ResponsesRequest, plan: Plan, prompt_tokens: int, directives: ResponsesDirectives):
        self.request, self.plan, self.directives = request, plan, directives
        self.id, self.created_at = f"resp_sim{uuid.uuid4().hex}", int(time.time())
        self.message_id, self.call_id = f"msg_sim{uuid.uuid4().hex}", f"call_sim{uuid.uuid4().hex[:12]}"
        self.prompt_tokens, self.sequence = prompt_tokens, itertools.count()

    @property
    def call(self) -> dict[str, Any] | None:
        """The function call item, when the directives ask for one."""
        if self.directives.tool is None:
            return None
        tool = next(t for t in self.request.tools if t.get("name") == self.directives.tool)
        return {"id": f"fc_{self.call_id}", "type": "function_call", "status": "completed",
                "call_id": self.call_id, "name": tool["name"],
                "arguments": orjson.dumps(tool_input(tool.get("parameters") or {})).decode()}

    def message(self, text: str | None, status: str = "completed") -> dict[str, Any]:
        content = [] if text is None else [{"type": "output_text", "text": text, "annotations": []}]
        return {"id": self.message_id, "type": "message", "role": "assistant", "status": status, "content": content}

    def usage(self) -> dict[str, Any]:
        cached = min(self.directives.cache_read or 0, self.prompt_tokens)
        return {"input_tokens": self.prompt_tokens, "input_tokens_details": {"cached_tokens": cached},
                "output_tokens": self.plan.tokens + (1 if self.call else 0),
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": self.prompt_tokens + self.plan.tokens + (1 if self.call else 0)}

    def body(self, done: bool = True) -> dict[str, Any]:
        """The response object: complete (with usage), or as response.created shows it."""
        output = [self.message(completion_text(self.plan.tokens)), *([self.call] if self.call else [])]
        status = ("incomplete" if self.plan.truncated else "completed") if done else "in_progress"
        return {"id": self.id, "object": "response", "created_at": self.created_at, "status": status,
                "error": None, "model": self.request.model, "output": output if done else [],
                "incomplete_details": {"reason": "max_output_tokens"} if done and self.plan.truncated else None,
                "usage": self.usage() if done else None, "instructions": self.request.instructions,
                # Served once done; until then, as asked (OpenAI's in-progress shell repeats the request).
                "service_tier": served_tier(self.request.service_tier, self.directives) if done
                else self.request.service_tier or "auto",
                "tools": self.request.tools, "max_output_tokens": self.request.max_output_tokens,
                "parallel_tool_calls": True, "tool_choice": "auto", "text": {"format": {"type": "text"}}}

    def event(self, kind: str, **fields: Any) -> bytes:
        data = orjson.dumps({"type": kind, "sequence_number": next(self.sequence), **fields})
        return b"event: " + kind.encode() + b"\ndata: " + data + b"\n\n"


async def responses(request: web.Request) -> web.StreamResponse:
    """Serve one response according to settings and in-prompt directives."""
    return await answer(request, request[RECORD_KEY].body)


async def answer(request: web.Request, body: Any) -> web.StreamResponse:
    """Answer the Responses request `body` (decoded JSON) as OpenAI does."""
    try:
        parsed, texts, directives = parse(body)
    except BadRequest as exc:
        return error_response(400, str(exc))
    plan = make_plan(request.app[SETTINGS_KEY], directives, parsed.max_output_tokens)
    if not await delay_headers(request, plan):
        return abandoned(request, "disconnected")
    if plan.status is not None:
        return simulated_error(plan.status)
    answer = make_answer(parsed, texts, directives, plan)
    return await (_stream(request, answer) if parsed.stream else respond_json(request, plan, answer.body()))


def json_answer(settings: Settings, body: Any) -> JsonAnswer:
    """The status and JSON body that answer `body` unstreamed, without the timing directives: how a
    batch line is answered."""
    try:
        parsed, texts, directives = parse(body)
    except BadRequest as exc:
        return 400, error_body(400, str(exc))
    plan = make_plan(settings, directives, parsed.max_output_tokens)
    if plan.status is not None:
        return plan.status, simulated_error_body(plan.status)
    return 200, make_answer(parsed, texts, directives, plan).body()


def make_answer(parsed: ResponsesRequest, texts: list[list[str]], directives: ResponsesDirectives,
                plan: Plan) -> Answer:
    media = openai_media_tokens(parsed.model, parsed.input if isinstance(parsed.input, list) else [])
    return Answer(parsed, plan, count_prompt_tokens(texts) + media, directives)


async def _stream(request: web.Request, answer: Answer) -> web.StreamResponse:
    response = web.StreamResponse(headers=SSE_HEADERS)
    try:
        await response.prepare(request)
        outcome = await _send_events(request, response, answer)
    except ConnectionError:  # a write after the client left
        outcome = "disconnected"
    request[RECORD_KEY].settle(outcome)
    return response


async def _send_events(request: web.Request, response: web.StreamResponse, answer: Answer) -> Outcome:
    plan, place = answer.plan, {"item_id": answer.message_id, "output_index": 0, "content_index": 0}
    shell = answer.body(done=False)
    for kind in ("response.created", "response.in_progress"):
        await response.write(answer.event(kind, response=shell))
    await response.write(answer.event("response.output_item.added", output_index=0,
                                      item=answer.message(None, "in_progress")))
    await response.write(answer.event("response.content_part.added", **place,
                                      part={"type": "output_text", "text": "", "annotations": []}))
    cut = stream_cut(plan)
    for index, text in enumerate(iter_tokens(plan.tokens if cut is None else min(cut, plan.tokens))):
        if index and not await pace(request, plan.token_interval_s):
            return "disconnected"
        await response.write(answer.event("response.output_text.delta", **place, delta=text, logprobs=[]))
    if plan.drop_after is not None:
        drop_connection(request)
        return "dropped"
    if plan.hang_after is not None:
        await wait_until_gone(request)
        return "disconnected"
    await response.write(_closing(answer, place))
    await response.write_eof()
    return "completed"


def _closing(answer: Answer, place: dict[str, Any]) -> bytes:
    """The message's done events, the function call's events, then the whole response."""
    text = completion_text(answer.plan.tokens)
    part = {"type": "output_text", "text": text, "annotations": []}
    frames = [answer.event("response.output_text.done", **place, text=text, logprobs=[]),
              answer.event("response.content_part.done", **place, part=part),
              answer.event("response.output_item.done", output_index=0, item=answer.message(text))]
    if (call := answer.call) is not None:
        where = {"item_id": call["id"], "output_index": 1}
        frames += [answer.event("response.output_item.added", output_index=1, item={**call, "arguments": "",
                                                                                    "status": "in_progress"}),
                   answer.event("response.function_call_arguments.delta", **where, delta=call["arguments"]),
                   answer.event("response.function_call_arguments.done", **where, arguments=call["arguments"]),
                   answer.event("response.output_item.done", output_index=1, item=call)]
    final = answer.body()
    kind = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
    return b"".join(frames) + answer.event(kind, response=final)


def add_routes(app: web.Application) -> None:
    """Mount the Responses route."""
    app.router.add_post(RESPONSES_PATH, responses)
