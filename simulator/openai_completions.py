"""POST /v1/completions: OpenAI's legacy text completions, as JSON or as an SSE stream.

Behaves as chat completions do (`simulator.openai_chat`: validate -> directives -> latency /
hang -> simulated error -> drop / hang_after / generation time -> answer), with the chat
directives read from the prompt. What differs:

* The prompt is a string or a list of strings (or token ids); its prompt tokens are the words
  of every prompt string (`str.split()`), plus one per token id, with no per-message overhead.
* One choice per prompt string, each `{"text", "index", "logprobs", "finish_reason"}`; the
  text is `simulator.textgen`'s completion of the planned tokens.
* `max_tokens` defaults to 16, as OpenAI's does on this route.
* A stream sends one chunk per token (carrying that token in every choice), a closing chunk per choice with its
  finish_reason, the usage chunk (choices []) when `stream_options.include_usage`, then [DONE].
* A hostile provider's `usage` and `malformed` faults spoil the answer (`simulator.hostile`).
"""

import time
import uuid
from typing import Annotated, Any

import msgspec
import orjson
from aiohttp import web

from simulator.behaviour import abandoned, delay_headers, pace, stream_cut
from simulator.connection import drop_connection, wait_until_gone
from simulator.directives import DirectiveError, Directives, parse_directives
from simulator.hostile import MALFORMED, spoiled_usage
from simulator.openai_chat import respond_json, simulated_error, simulated_error_body
from simulator.openai_wire import DONE_EVENT, SSE_HEADERS, JsonAnswer, StreamOptions, error_body, error_response, \
    usage_body
from simulator.plan import Plan, make_plan
from simulator.recording import RECORD_KEY, Outcome
from simulator.settings import SETTINGS_KEY, Settings
from simulator.textgen import completion_text, iter_chunks

COMPLETIONS_PATH = "/v1/completions"
DEFAULT_MAX_TOKENS = 16


class CompletionRequest(msgspec.Struct):
    """The fields the simulator reads; unknown fields are accepted and ignored."""

    model: str
    prompt: str | list[str | int | list[int]]
    max_tokens: Annotated[int, msgspec.Meta(ge=0)] = DEFAULT_MAX_TOKENS
    stream: bool = False
    stream_options: StreamOptions | None = None

    @property
    def texts(self) -> list[str]:
        return [self.prompt] if isinstance(self.prompt, str) else [p for p in self.prompt if isinstance(p, str)]

    @property
    def prompt_tokens(self) -> int:
        pieces = [self.prompt] if isinstance(self.prompt, str) else self.prompt
        return sum(len(p.split()) if isinstance(p, str) else 1 for p in pieces)


class Reply(msgspec.Struct, frozen=True):
    request: CompletionRequest
    plan: Plan
    faults: Directives
    completion_id: str = msgspec.field(default_factory=lambda: f"cmpl-sim-{uuid.uuid4().hex}")
    created: int = msgspec.field(default_factory=lambda: int(time.time()))

    @property
    def choices(self) -> int:
        return max(len(self.request.texts), 1)

    @property
    def usage(self) -> dict[str, Any]:
        usage = usage_body(self.request.prompt_tokens, self.plan.tokens * self.choices)
        return spoiled_usage(usage, self.faults.usage, "prompt_tokens")

    def head(self) -> dict[str, Any]:
        return {"id": self.completion_id, "object": "text_completion", "created": self.created,
                "model": self.request.model}

    def choice(self, index: int, text: str, finish_reason: str | None) -> dict[str, Any]:
        return {"text": text, "index": index, "logprobs": None, "finish_reason": finish_reason}

    @property
    def finish_reason(self) -> str:
        return "length" if self.plan.truncated else "stop"

    def body(self) -> dict[str, Any]:
        text = completion_text(self.plan.tokens)
        choices = [self.choice(i, text, self.finish_reason) for i in range(self.choices)]
        return {**self.head(), "choices": MALFORMED if self.faults.malformed else choices, "usage": self.usage}


async def create_completion(request: web.Request) -> web.StreamResponse:
    """Serve one text completion according to settings and in-prompt directives."""
    try:
        parsed, found = parse(request[RECORD_KEY].body)
    except (msgspec.ValidationError, DirectiveError) as exc:
        return error_response(400, f"Invalid completion request: {exc}")
    plan = make_plan(request.app[SETTINGS_KEY], found, parsed.max_tokens)
    if not await delay_headers(request, plan):
        return abandoned(request, "disconnected")
    if plan.status is not None:
        return simulated_error(plan.status)
    reply = Reply(parsed, plan, found)
    if parsed.stream:
        return await _stream(request, reply)
    return await respond_json(request, plan, reply.body())


def parse(body: Any) -> tuple[CompletionRequest, Directives]:
    """The request and its directives; raises msgspec.ValidationError or DirectiveError."""
    parsed = msgspec.convert(body, CompletionRequest)
    return parsed, parse_directives(parsed.texts)


def json_answer(settings: Settings, body: Any) -> JsonAnswer:
    """The status and JSON body that answer `body` unstreamed, without the timing directives: how a
    batch line is answered."""
    try:
        parsed, found = parse(body)
    except (msgspec.ValidationError, DirectiveError) as exc:
        return 400, error_body(400, f"Invalid completion request: {exc}")
    plan = make_plan(settings, found, parsed.max_tokens)
    if plan.status is not None:
        return plan.status, simulated_error_body(plan.status)
    return 200, Reply(parsed, plan, found).body()


async def _stream(request: web.Request, reply: Reply) -> web.StreamResponse:
    response = web.StreamResponse(headers=SSE_HEADERS)
    try:
        await response.prepare(request)
        outcome = await _send_events(request, response, reply)
    except ConnectionError:
        outcome = "disconnected"
    request[RECORD_KEY].settle(outcome)
    return response


def _frame(payload: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(payload) + b"\n\n"


async def _send_events(request: web.Request, response: web.StreamResponse, reply: Reply) -> Outcome:
    plan, head = reply.plan, reply.head()
    cut = stream_cut(plan)
    for sent, text in enumerate(iter_chunks(plan.tokens if cut is None else min(cut, plan.tokens), plan.chunk_bytes)):
        if sent and not await pace(request, plan.token_interval_s):
            return "disconnected"
        await response.write(_frame({**head, "choices": [reply.choice(i, text, None) for i in range(reply.choices)]}))
    if plan.drop_after is not None:
        drop_connection(request)
        return "dropped"
    if plan.hang_after is not None:
        await wait_until_gone(request)
        return "disconnected"
    closing = [reply.choice(i, "", reply.finish_reason) for i in range(reply.choices)]
    await response.write(_frame({**head, "choices": MALFORMED if reply.faults.malformed else closing}))
    options = reply.request.stream_options
    if options and options.include_usage:
        await response.write(_frame({**head, "choices": [], "usage": reply.usage}))
    await response.write(DONE_EVENT)
    await response.write_eof()
    return "completed"


def add_routes(app: web.Application) -> None:
    """Mount the OpenAI legacy completions route."""
    app.router.add_post(COMPLETIONS_PATH, create_completion)
