"""Music generation on the Gemini route: ``POST /v1beta/models/{music model}:generateContent``.

Order of behaviour for one request: validate -> directives (`MusicDirectives`) ->
latency / hang -> simulated error status -> drop -> safety block -> answer.

An answer has one candidate with a text part (`simulator.lyrics`) and, unless
``[sim:no_audio]``, an ``audio/mpeg`` inlineData part: `simulator.mp3` silence
lasting the model's duration, led by an ID3 tag naming the model and the SHA-256 of
the request's contents, so equal prompts give equal bytes and different prompts
different bytes.

candidatesTokenCount: the words of the text part + AUDIO_TOKENS_PER_S per whole
second of audio (none without audio).
"""

import hashlib
import itertools
from types import MappingProxyType
from typing import Any

import msgspec
from aiohttp import web

from simulator.behaviour import abandoned, delay_headers
from simulator.connection import drop_connection
from simulator.directives import DirectiveError, MusicDirectives, parse_music_directives
from simulator.gemini_wire import (
    GenerateContentRequest,
    InvalidArgument,
    candidate,
    error_response,
    generate_content_body,
    inline_data_part,
    json_response,
    parse_generate_content,
    prompt_blocked_body,
    prompt_token_count,
    request_texts,
    safety_stopped_candidate,
    simulated_error,
    text_part,
    usage_metadata,
)
from simulator.lyrics import song_text
from simulator.mp3 import silent_mp3
from simulator.plan import make_music_plan
from simulator.recording import RECORD_KEY
from simulator.settings import SETTINGS_KEY

AUDIO_MIME_TYPE = "audio/mpeg"
AUDIO_TOKENS_PER_S = 32  # Gemini's rate for audio
PROMPT_BLOCKED_MESSAGE = "The prompt was blocked due to safety reasons."


class MusicModel(msgspec.Struct, frozen=True):
    """A simulated music model: how long its tracks last and how its songs are laid out."""

    name: str
    seconds: float
    sections: tuple[str, ...]


MUSIC_MODELS = MappingProxyType(
    {
        model.name: model
        for model in (
            MusicModel("tune-3-clip-preview", 30, ("intro", "verse", "chorus", "outro")),
            MusicModel(
                "tune-3-pro-preview",
                150,
                ("intro", "verse", "chorus", "verse", "chorus", "bridge", "chorus", "outro"),
            ),
        )
    }
)


class MusicCall(msgspec.Struct, frozen=True):
    """A validated music request: the request, its prompt text and its directives."""

    request: GenerateContentRequest
    prompt: str
    prompt_tokens: int
    directives: MusicDirectives


async def generate_music(request: web.Request, model: str) -> web.StreamResponse:
    """Serve one music generation by `model` (a MUSIC_MODELS name) per settings and directives."""
    try:
        call = parse_music_request(request[RECORD_KEY].body)
    except InvalidArgument as exc:
        return error_response(400, str(exc))
    plan = make_music_plan(request.app[SETTINGS_KEY], call.directives)
    if not await delay_headers(request, plan):
        return abandoned(request, "disconnected")
    if plan.status is not None:
        return simulated_error(plan.status)
    if plan.drop_after is not None:
        drop_connection(request)
        return abandoned(request, "dropped")
    return music_answer(MUSIC_MODELS[model], call)


def parse_music_request(body: Any) -> MusicCall:
    """The validated call in decoded JSON `body`; raises InvalidArgument."""
    request = parse_generate_content(body)
    texts = list(itertools.chain.from_iterable(request_texts(request)))
    try:
        directives = parse_music_directives(texts)
    except DirectiveError as exc:
        raise InvalidArgument(str(exc)) from exc
    return MusicCall(request, "\n".join(texts), prompt_token_count(request), directives)


def music_answer(model: MusicModel, call: MusicCall) -> web.Response:
    """The response to `call`: a safety refusal when a block directive asks for one, else a song."""
    block = call.directives.block
    if block == "400":
        return error_response(400, PROMPT_BLOCKED_MESSAGE)
    no_output = usage_metadata(call.prompt_tokens, 0)
    if block == "prompt":
        return json_response(prompt_blocked_body(no_output, model.name))
    if block == "candidate":
        candidates = [safety_stopped_candidate()]
        return json_response(generate_content_body(candidates, no_output, model.name))
    return json_response(song_body(model, call))


def song_body(model: MusicModel, call: MusicCall) -> dict[str, Any]:
    """The successful answer: lyrics text and (unless no_audio) the MP3, with usage."""
    text = song_text(call.prompt, model.sections)
    parts: list[dict[str, Any]] = [text_part(text)]
    tokens = len(text.split())
    if not call.directives.no_audio:
        parts.append(inline_data_part(AUDIO_MIME_TYPE, song_mp3(model, call.request)))
        tokens += AUDIO_TOKENS_PER_S * int(model.seconds)
    usage = usage_metadata(call.prompt_tokens, tokens)
    return generate_content_body([candidate(parts)], usage, model.name)


def song_mp3(model: MusicModel, request: GenerateContentRequest) -> bytes:
    """The track's MP3: silence of the model's duration, tagged with model and prompt hash."""
    prompt_hash = hashlib.sha256(msgspec.json.encode(request.contents)).hexdigest()
    return silent_mp3(model.seconds, {"model": model.name, "prompt_sha256": prompt_hash})
