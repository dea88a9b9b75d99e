"""POST /v1/chat/completions: answers in OpenAI's format, as JSON or as an SSE stream.

Order of behaviour for one request: validate -> directives -> latency / hang ->
simulated error status -> (non-stream) drop / hang_after / generation time ->
response. Token counts and text follow `simulator.textgen`. The answer (every chunk of a stream)
names the `service_tier` served: the one asked for, as OpenAI reports it, unless
``[sim:served_tier=NAME]`` says otherwise (`openai_wire.served_tier`). A hostile provider's faults
(`simulator.hostile`: usage, malformed, bad_chunk, no_end) spoil the answer; a stream's broken
chunks come after its tokens, before the finish chunk.
"""

import itertools
import time
import uuid
from typing import Any

import msgspec
import orjson
from aiohttp import web

from simulator.behaviour import abandoned, delay_headers, pace, stream_cut
from simulator.connection import drop_connection, wait_until_gone
from simulator.directives import DirectiveError, parse_as
from simulator.hostile import MALFORMED, NO_FAULTS, HostileDirectives, broken_frames, spoiled_usage
from simulator.openai_wire import (
    DONE_EVENT,
    SSE_HEADERS,
    NO_OPENAI_DIRECTIVES,
    ChatRequest,
    ChunkEncoder,
    OpenAIDirectives,
    JsonAnswer,
    completion_body,
    error_body,
    error_response,
    json_response,
    message_texts,
    served_tier,
    usage_body,
)
from simulator.media_billing import openai_media_tokens
from simulator.plan import Plan, generation_time, make_plan
from simulator.recording import RECORD_KEY, Outcome
from simulator.settings import SETTINGS_KEY, Settings
from simulator.textgen import completion_text, count_prompt_tokens, iter_chunks

CHAT_COMPLETIONS_PATH = "/v1/chat/completions"


class Reply(msgspec.Struct, frozen=True):
    """Identity and accounting of one completion, shared by its JSON body or its chunks."""

    completion_id: str
    created: int
    model: str
    prompt_tokens: int
    plan: Plan
    cached_tokens: int = 0
    faults: HostileDirectives = NO_FAULTS
    service_tier: str = "default"  # the tier the answer says it was served at

    @property
    def broken_frames(self) -> list[bytes]:
        """The broken chunks a hostile stream sends after its content."""
        malformed = b"data: " + orjson.dumps({"id": self.completion_id, "choices": MALFORMED}) + b"\n\n"
        return broken_frames(self.faults, malformed)

    @property
    def finish_reason(self) -> str:
        """OpenAI's stop reason: "length" when the client's token limit cut the text short."""
        return "length" if self.plan.truncated else "stop"

    @property
    def usage(self) -> dict[str, Any]:
        """The ``usage`` object of this completion (as a hostile provider spoils it, if asked)."""
        usage = usage_body(self.prompt_tokens, self.plan.tokens, self.cached_tokens)
        return spoiled_usage(usage, self.faults.usage, "prompt_tokens", ("prompt_tokens_details", "cached_tokens"))

    def body(self, content: str) -> dict[str, Any]:
        """The non-streamed ``chat.completion`` object carrying `content`."""
        body = completion_body(
            self.completion_id, self.created, self.model, content, self.finish_reason, self.usage,
            self.service_tier,
        )
        return {**body, "choices": MALFORMED} if self.faults.malformed else body


class BadRequest(ValueError):
    """A request the real API would reject with 400; the message says why."""


async def chat_completions(request: web.Request) -> web.StreamResponse:
    """Serve one chat completion according to settings and in-prompt directives."""
    return await answer(request, request[RECORD_KEY].body)


async def answer(request: web.Request, body: Any, encoder: type[ChunkEncoder] = ChunkEncoder) -> web.StreamResponse:
    """Answer the chat request `body` (decoded JSON) as OpenAI does; a stream's chunks come from
    `encoder` (a cloud's subclass may decorate them)."""
    try:
        chat, texts, directives = parse_chat_request(body)
    except BadRequest as exc:
        return error_response(400, str(exc))
    plan = make_plan(request.app[SETTINGS_KEY], directives, chat.token_limit)
    if not await delay_headers(request, plan):
        return abandoned(request, "disconnected")
    if plan.status is not None:
        return simulated_error(plan.status)
    reply = make_reply(body, chat, texts, directives, plan)
    if chat.stream:
        return await _stream(request, reply, chat.include_usage, encoder)
    return await _respond_json(request, reply)


def json_answer(settings: Settings, body: Any) -> JsonAnswer:
    """The status and JSON body that answer `body` unstreamed, without the timing directives (latency,
    pacing, hang, drop belong to a connection): how a batch line is answered."""
    try:
        chat, texts, directives = parse_chat_request(body)
    except BadRequest as exc:
        return 400, error_body(400, str(exc))
    plan = make_plan(settings, directives, chat.token_limit)
    if plan.status is not None:
        return plan.status, simulated_error_body(plan.status)
    return 200, make_reply(body, chat, texts, directives, plan).body(completion_text(plan.tokens))


def make_reply(body: dict[str, Any], chat: ChatRequest, texts: list[list[str]], directives: OpenAIDirectives,
               plan: Plan) -> Reply:
    """The completion that answers the parsed request `body` under `plan`."""
    media = openai_media_tokens(chat.model, body.get("messages") or [])
    return Reply(_completion_id(), int(time.time()), chat.model, count_prompt_tokens(texts) + media, plan,
                 directives.cache_read or 0, directives, served_tier(chat.service_tier, directives))


def parse_chat_request(body: Any) -> tuple[ChatRequest, list[list[str]], OpenAIDirectives]:
    """The request, the text pieces of each message, and its directives; raises BadRequest."""
    if body is None:
        raise BadRequest("We could not parse the JSON body of your request.")
    try:
        chat = msgspec.convert(body, ChatRequest)
    except msgspec.ValidationError as exc:
        raise BadRequest(f"Invalid chat completion request: {exc}") from exc
    texts = [message_texts(message) for message in chat.messages]
    try:
        return chat, texts, parse_as(itertools.chain.from_iterable(texts), NO_OPENAI_DIRECTIVES)
    except DirectiveError as exc:
        raise BadRequest(str(exc)) from exc


def simulated_error(status: int) -> web.Response:
    """The error a ``[sim:status=CODE]`` directive asks for (429 adds ``Retry-After: 1``)."""
    headers = {"Retry-After": "1"} if status == 429 else None
    return error_response(status, f"simulated error {status}", headers=headers)


def simulated_error_body(status: int) -> dict[str, Any]:
    """The JSON body of `simulated_error`."""
    return error_body(status, f"simulated error {status}")


async def _respond_json(request: web.Request, reply: Reply) -> web.StreamResponse:
    return await respond_json(request, reply.plan, reply.body(completion_text(reply.plan.tokens)))


async def respond_json(request: web.Request, plan: Plan, body: dict[str, Any]) -> web.StreamResponse:
    """Answer with `body` after the generation time, unless told to drop or hang."""
    if plan.drop_after is not None:
        drop_connection(request)
        return abandoned(request, "dropped")
    if plan.hang_after is not None:
        # A JSON body cannot be sent in part, so "hang after K tokens" means never answering.
        await wait_until_gone(request)
        return abandoned(request, "disconnected")
    # A real provider takes as long to generate a JSON answer as to stream it.
    if not await pace(request, generation_time(plan)):
        return abandoned(request, "disconnected")
    return json_response(body)


async def _stream(request: web.Request, reply: Reply, include_usage: bool,
                  encoder_type: type[ChunkEncoder]) -> web.StreamResponse:
    """Send the SSE stream; each event is written to the transport as soon as it is produced."""
    encoder = encoder_type(reply.completion_id, reply.created, reply.model, include_usage, reply.service_tier)
    response = web.StreamResponse(headers=SSE_HEADERS)
    try:
        await response.prepare(request)
        outcome = await _send_events(request, response, encoder, reply, include_usage)
    except ConnectionError:  # aiohttp's ClientConnectionResetError: a write after a disconnect
        outcome = "disconnected"
    request[RECORD_KEY].settle(outcome)
    return response


async def _send_events(
    request: web.Request,
    response: web.StreamResponse,
    encoder: ChunkEncoder,
    reply: Reply,
    include_usage: bool,
) -> Outcome:
    """Write the events of `reply` in order; the outcome tells how the stream ended."""
    plan = reply.plan
    await response.write(encoder.role())
    if not await _send_tokens(request, response, encoder, plan):
        return "disconnected"
    if plan.drop_after is not None:
        drop_connection(request)
        return "dropped"
    if plan.hang_after is not None:
        await wait_until_gone(request)
        return "disconnected"
    for frame in reply.broken_frames:
        await response.write(frame)
    await response.write(encoder.finish(reply.finish_reason))
    if include_usage:
        await response.write(encoder.usage(reply.usage))
    if not reply.faults.no_end:
        await response.write(DONE_EVENT)
    await response.write_eof()
    return "completed"


async def _send_tokens(
    request: web.Request, response: web.StreamResponse, encoder: ChunkEncoder, plan: Plan
) -> bool:
    """Write the token chunks up to the stream's cut, paced; False when the client left."""
    cut = stream_cut(plan)
    count = plan.tokens if cut is None else min(cut, plan.tokens)
    for index, text in enumerate(iter_chunks(count, plan.chunk_bytes)):
        if index and not await pace(request, plan.token_interval_s):
            return False
        await response.write(encoder.token(text))
    return True


def _completion_id() -> str:
    return f"chatcmpl-sim-{uuid.uuid4().hex}"


def add_routes(app: web.Application) -> None:
    """Mount the OpenAI chat-completions route."""
    app.router.add_post(CHAT_COMPLETIONS_PATH, chat_completions)
