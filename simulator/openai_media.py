"""Knobs shared by the OpenAI media routes (embeddings, speech, transcription).

Directives are read from the request's own text: an embedding's `input`, a speech
`input` (and `instructions`), a transcription's `prompt` field. Order for one request:
latency / hang -> simulated error status -> drop -> answer (speech may then hang or
drop after K audio chunks).
"""

from collections.abc import Iterable
from typing import Any, TypeVar

import msgspec
from aiohttp import web

from simulator.behaviour import abandoned, delay_headers
from simulator.connection import drop_connection
from simulator.directives import ErrorStatus, NonNegative, parse_as
from simulator.hostile import UsageFault
from simulator.openai_chat import simulated_error
from simulator.openai_wire import error_response
from simulator.plan import Plan
from simulator.settings import Settings


class MediaDirectives(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Per-request overrides every media route honours; None / False means "not given".
    Each route reads its own subclass, so a knob it would ignore is an unknown directive.

    status, latency_ms, hang: as for chat.
    drop_after: abort the connection; a JSON answer is dropped before any byte, a speech
        stream after K audio chunks.
    """

    status: ErrorStatus | None = None
    latency_ms: NonNegative | None = None
    hang: bool = False
    drop_after: NonNegative | None = None


class AnswerDirectives(MediaDirectives, frozen=True, forbid_unknown_fields=True):
    """The knobs of the routes answering with one JSON body (embeddings, transcriptions).

    usage, malformed: a hostile provider's faults in that body (`simulator.hostile`).
    """

    usage: UsageFault | None = None
    malformed: bool = False


class SpeechDirectives(MediaDirectives, frozen=True, forbid_unknown_fields=True):
    """The knobs of the speech route, which streams audio.

    hang_after: send K audio chunks, then go silent until the client leaves.
    """

    hang_after: NonNegative | None = None


NO_ANSWER_DIRECTIVES = AnswerDirectives()
NO_SPEECH_DIRECTIVES = SpeechDirectives()
Knobs = TypeVar("Knobs", bound=MediaDirectives)


class BadRequest(ValueError):
    """A request the real API would answer with 400; the message says why."""


def media_directives(texts: Iterable[str], empty: Knobs) -> Knobs:
    """The directives in `texts`, read as the route's own knobs (`empty`: none given);
    BadRequest for a malformed or unknown marker."""
    try:
        return parse_as(texts, empty)
    except ValueError as exc:
        raise BadRequest(str(exc)) from exc


def media_plan(settings: Settings, directives: MediaDirectives, hang_after: int | None = None) -> Plan:
    """Settings merged with `directives` (no tokens: media answers are not token-paced);
    `hang_after` from the speech route's own knobs."""
    latency_ms = settings.latency_ms if directives.latency_ms is None else directives.latency_ms
    return Plan(latency_s=latency_ms / 1000, tokens=0, truncated=False, token_interval_s=0.0,
                status=directives.status, hang=directives.hang, hang_after=hang_after,
                drop_after=directives.drop_after)


async def refusal(request: web.Request, plan: Plan, *, whole: bool = True) -> web.StreamResponse | None:
    """The answer that replaces the real one (latency first): a hang, a simulated error, or,
    when the answer is sent `whole`, a dropped connection. None: go on and answer."""
    if not await delay_headers(request, plan):
        return abandoned(request, "disconnected")
    if plan.status is not None:
        return simulated_error(plan.status)
    if whole and plan.drop_after is not None:
        drop_connection(request)
        return abandoned(request, "dropped")
    return None


def bad_request(exc: BadRequest) -> web.Response:
    return error_response(400, str(exc))


def json_body(body: Any) -> dict[str, Any]:
    """A decoded JSON request body that must be an object; BadRequest otherwise."""
    if not isinstance(body, dict):
        raise BadRequest("We could not parse the JSON body of your request.")
    return body


def convert(body: dict[str, Any], schema: type) -> Any:
    """`body` as `schema`, naming the offending field the way the real API does."""
    try:
        return msgspec.convert(body, schema)
    except msgspec.ValidationError as exc:
        raise BadRequest(f"Invalid request: {exc}") from exc
