"""POST /v1/audio/speech and /v1/audio/transcriptions in OpenAI's formats.

Speech: `input` lasts SECONDS_PER_CHAR seconds a character, divided by `speed`. mp3 is
real MP3 (`simulator.mp3` silence); wav and pcm are real 24 kHz 16-bit mono silence;
opus, aac and flac are stood in for by the MP3 frames under their own content type. The
audio is sent in SPEECH_CHUNKS pieces, CHUNK_INTERVAL_S apart; `[sim:hang_after=K]` and
`[sim:drop_after=K]` (in `input` or `instructions`) stop the stream after K pieces.

Transcription: the multipart upload is read part by part and the file in chunks, counted
and hashed, never held whole. Its duration is the sum of its MP3 frames when it is MP3,
else BYTES_PER_SECOND bytes a second. The transcript has WORDS_PER_SECOND words of
simulator.textgen text, in segments of SEGMENT_WORDS words. whisper models report usage
as ``{"type": "duration", "seconds": ceil(duration)}``; gpt-4o models as tokens
(AUDIO_TOKENS_PER_SECOND audio tokens a second plus the prompt's words in, the words out).
The record of the request holds the form fields and, for the file, its filename, content
type, byte count and SHA-256. Directives are read from the `prompt` field.
"""

import asyncio
import hashlib
import itertools
import math
import struct
from typing import Annotated, Any, Literal

import msgspec
from aiohttp import BodyPartReader, web

from simulator.behaviour import pace
from simulator.connection import drop_connection, wait_until_gone
from simulator.hostile import spoiled_usage
from simulator.mp3 import audio_start, frames_for, parse_frame_header, silent_frames
from simulator.openai_media import NO_ANSWER_DIRECTIVES, NO_SPEECH_DIRECTIVES, AnswerDirectives, BadRequest, \
    bad_request, convert, json_body, media_directives, media_plan, refusal
from simulator.openai_wire import json_response
from simulator.plan import Plan
from simulator.recording import RECORD_KEY, Outcome
from simulator.settings import SETTINGS_KEY
from simulator.textgen import completion_text

SPEECH_PATH = "/v1/audio/speech"
TRANSCRIPTIONS_PATH = "/v1/audio/transcriptions"

SECONDS_PER_CHAR = 0.06
SPEECH_CHUNKS = 8
CHUNK_INTERVAL_S = 0.01
PCM_RATE = 24_000
CONTENT_TYPES = {"mp3": "audio/mpeg", "opus": "audio/opus", "aac": "audio/aac", "flac": "audio/flac",
                 "wav": "audio/wav", "pcm": "audio/pcm"}

BYTES_PER_SECOND = 16_000
WORDS_PER_SECOND = 2
SEGMENT_WORDS = 10
AUDIO_TOKENS_PER_SECOND = 10
READ_CHUNK = 64 * 1024
TRANSCRIPT_FORMATS = ("json", "text", "srt", "verbose_json", "vtt")


# -- speech ------------------------------------------------------------------------------------

class SpeechRequest(msgspec.Struct):
    model: str
    input: Annotated[str, msgspec.Meta(min_length=1, max_length=4096)]
    voice: str | dict[str, str]
    response_format: Literal["mp3", "opus", "aac", "flac", "wav", "pcm"] = "mp3"
    speed: Annotated[float, msgspec.Meta(ge=0.25, le=4.0)] = 1.0
    instructions: str | None = None


def speech_seconds(text: str, speed: float = 1.0) -> float:
    return len(text) * SECONDS_PER_CHAR / speed


def speech_audio(response_format: str, seconds: float) -> bytes:
    """The whole audio of a speech answer (see the module docstring)."""
    if response_format in ("wav", "pcm"):
        samples = bytes(2 * max(round(seconds * PCM_RATE), 1))
        return wav_header(len(samples)) + samples if response_format == "wav" else samples
    return silent_frames(max(frames_for(seconds), 1))


def wav_header(data_bytes: int) -> bytes:
    """A RIFF/WAVE header for `data_bytes` of 16-bit mono PCM at PCM_RATE."""
    fmt = struct.pack("<HHIIHH", 1, 1, PCM_RATE, PCM_RATE * 2, 2, 16)
    return (b"RIFF" + struct.pack("<I", 36 + data_bytes) + b"WAVE" + b"fmt " + struct.pack("<I", 16)
            + fmt + b"data" + struct.pack("<I", data_bytes))


def split(data: bytes, count: int) -> list[bytes]:
    """`data` in `count` nearly equal consecutive pieces (fewer when it is shorter)."""
    count = max(min(count, len(data)), 1)
    bounds = [len(data) * index // count for index in range(count + 1)]
    return [data[start:end] for start, end in itertools.pairwise(bounds)]


async def create_speech(request: web.Request) -> web.StreamResponse:
    """Stream the speech of `input` in pieces, per settings and directives."""
    return await speak(request, request[RECORD_KEY].body)


async def speak(request: web.Request, body: Any) -> web.StreamResponse:
    """Answer the speech request `body` (decoded JSON) as OpenAI does."""
    try:
        speech = convert(json_body(body), SpeechRequest)
        directives = media_directives([speech.input, speech.instructions or ""], NO_SPEECH_DIRECTIVES)
    except BadRequest as exc:
        return bad_request(exc)
    plan = media_plan(request.app[SETTINGS_KEY], directives, directives.hang_after)
    if (refused := await refusal(request, plan, whole=False)) is not None:
        return refused
    audio = speech_audio(speech.response_format, speech_seconds(speech.input, speech.speed))
    response = web.StreamResponse(headers={"Content-Type": CONTENT_TYPES[speech.response_format]})
    try:
        await response.prepare(request)
        outcome = await _send_audio(request, response, split(audio, SPEECH_CHUNKS), plan)
    except ConnectionError:  # a write after the client left
        outcome = "disconnected"
    request[RECORD_KEY].settle(outcome)
    return response


async def _send_audio(request: web.Request, response: web.StreamResponse, pieces: list[bytes],
                      plan: Plan) -> Outcome:
    cut = plan.drop_after if plan.drop_after is not None else plan.hang_after
    for index, piece in enumerate(pieces[:cut]):
        if index and not await pace(request, CHUNK_INTERVAL_S):
            return "disconnected"
        await response.write(piece)
    if plan.drop_after is not None:
        await asyncio.sleep(0)  # let the written pieces reach the socket before the abort
        drop_connection(request)
        return "dropped"
    if plan.hang_after is not None:
        await wait_until_gone(request)
        return "disconnected"
    await response.write_eof()
    return "completed"


# -- transcription -------------------------------------------------------------------------------

class Mp3Clock:
    """Sums the frame durations of an MP3 fed in pieces, keeping at most a partial header."""

    def __init__(self) -> None:
        self.seconds, self.frames, self.valid = 0.0, 0, True
        self._pending, self._skip, self._started = b"", 0, False

    def feed(self, chunk: bytes) -> None:
        if not self.valid:
            return
        data, position = (self._pending + chunk if self._pending else chunk), self._skip
        if not self._started:
            if len(data) < 10:
                self._pending = data
                return
            position, self._started = audio_start(data), True
        self._walk(data, position)

    def _walk(self, data: bytes, position: int) -> None:
        while position + 4 <= len(data):
            try:
                header = parse_frame_header(data[position:position + 4])
            except ValueError:
                self.valid = False
                return
            self.seconds += header.duration_s
            self.frames += 1
            position += header.length
        self._skip = max(position - len(data), 0)
        self._pending = data[position:]

    @property
    def duration_s(self) -> float | None:
        """The audio's length, None when the bytes were not MP3 frames."""
        return self.seconds if self.valid and self.frames else None


class AudioFile(msgspec.Struct, frozen=True):
    filename: str
    content_type: str
    bytes: int
    sha256: str
    seconds: float

    def facts(self) -> dict[str, Any]:
        return {"filename": self.filename, "content_type": self.content_type, "bytes": self.bytes,
                "sha256": self.sha256}


class Transcription(msgspec.Struct, frozen=True):
    model: str
    response_format: str
    language: str
    prompt: str
    seconds: float


async def read_file(part: BodyPartReader) -> AudioFile:
    """Read the file part chunk by chunk: counted, hashed and timed, never held whole."""
    digest, clock, size = hashlib.sha256(), Mp3Clock(), 0
    while chunk := await part.read_chunk(READ_CHUNK):
        digest.update(chunk)
        clock.feed(chunk)
        size += len(chunk)
    seconds = clock.duration_s
    return AudioFile(part.filename or "", part.headers.get("Content-Type", ""), size, digest.hexdigest(),
                     size / BYTES_PER_SECOND if seconds is None else seconds)


async def read_form(request: web.Request) -> tuple[dict[str, Any], AudioFile | None]:
    """The text fields (a repeated name gives a list) and the file of the multipart body."""
    if not request.content_type.startswith("multipart/"):
        raise BadRequest("The request must be multipart/form-data.")
    fields: dict[str, Any] = {}
    audio = None
    async for part in await request.multipart():
        if not isinstance(part, BodyPartReader):
            raise BadRequest("Nested multipart bodies are not supported.")
        if part.name == "file":
            audio = await read_file(part)
            continue
        value = await part.text()
        old = fields.get(part.name or "")
        fields[part.name or ""] = value if old is None else [*(old if isinstance(old, list) else [old]), value]
    request[RECORD_KEY].body = {**fields, "file": audio.facts() if audio else None}
    return fields, audio


def transcription_of(fields: dict[str, Any], audio: AudioFile | None) -> Transcription:
    """The validated request; BadRequest naming what is missing or wrong."""
    if not isinstance(fields.get("model"), str) or not fields["model"]:
        raise BadRequest("you must provide a model parameter")
    if audio is None or audio.bytes == 0:
        raise BadRequest("you must provide a non-empty 'file'")
    response_format = fields.get("response_format", "json")
    if response_format not in TRANSCRIPT_FORMATS:
        raise BadRequest(f"'response_format' must be one of {', '.join(TRANSCRIPT_FORMATS)}")
    return Transcription(fields["model"], response_format, str(fields.get("language") or "english"),
                         str(fields.get("prompt") or ""), audio.seconds)


def transcript_words(seconds: float) -> int:
    return max(round(seconds * WORDS_PER_SECOND), 1)


def segments(seconds: float) -> list[dict[str, Any]]:
    """The transcript in segments of SEGMENT_WORDS words, timed at WORDS_PER_SECOND."""
    words = completion_text(transcript_words(seconds)).split()
    pieces = [words[start:start + SEGMENT_WORDS] for start in range(0, len(words), SEGMENT_WORDS)]
    span = SEGMENT_WORDS / WORDS_PER_SECOND
    return [{"id": index, "seek": 0, "start": index * span, "end": min((index + 1) * span, round(seconds, 3)),
             "text": " " + " ".join(piece), "tokens": [], "temperature": 0.0, "avg_logprob": -0.25,
             "compression_ratio": 1.2, "no_speech_prob": 0.01} for index, piece in enumerate(pieces)]


def transcription_usage(call: Transcription, words: int) -> dict[str, Any]:
    """What OpenAI reports: seconds for whisper models, tokens for gpt-4o models."""
    if not call.model.startswith("gpt-"):
        return {"type": "duration", "seconds": math.ceil(call.seconds)}
    audio_tokens = math.ceil(call.seconds * AUDIO_TOKENS_PER_SECOND)
    text_tokens = len(call.prompt.split())
    return {"type": "tokens", "input_tokens": audio_tokens + text_tokens, "output_tokens": words,
            "total_tokens": audio_tokens + text_tokens + words,
            "input_token_details": {"text_tokens": text_tokens, "audio_tokens": audio_tokens}}


def timestamp(seconds: float, separator: str) -> str:
    millis = round(seconds * 1000)
    hours, rest = divmod(millis, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    return f"{hours:02d}:{minutes:02d}:{rest // 1000:02d}{separator}{rest % 1000:03d}"


def subtitles(parts: list[dict[str, Any]], vtt: bool) -> str:
    """SRT (numbered cues, comma before the milliseconds) or WebVTT (a header, a full stop)."""
    separator = "." if vtt else ","
    cues = [f"{timestamp(part['start'], separator)} --> {timestamp(part['end'], separator)}\n"
            f"{part['text'].strip()}\n" for part in parts]
    if not vtt:
        cues = [f"{number}\n{cue}" for number, cue in enumerate(cues, 1)]
    return ("WEBVTT\n\n" if vtt else "") + "\n".join(cues)


def transcription_answer(call: Transcription, faults: AnswerDirectives = NO_ANSWER_DIRECTIVES) -> web.Response:
    """The answer in the asked format: JSON objects, or plain text, SRT or WebVTT (a hostile
    provider's faults spoil the usage, or make the text a number)."""
    words = transcript_words(call.seconds)
    text = completion_text(words).strip()
    if call.response_format == "text":
        return web.Response(text=text + "\n", content_type="text/plain")
    if call.response_format in ("srt", "vtt"):
        return web.Response(text=subtitles(segments(call.seconds), call.response_format == "vtt"),
                            content_type="text/plain")
    usage = transcription_usage(call, words)
    usage = spoiled_usage(usage, faults.usage, "seconds" if usage["type"] == "duration" else "input_tokens")
    shown = 5 if faults.malformed else text
    if call.response_format == "json":
        return json_response({"text": shown, "usage": usage})
    return json_response({"task": "transcribe", "language": call.language, "duration": round(call.seconds, 3),
                          "text": shown, "segments": segments(call.seconds), "usage": usage})


async def create_transcription(request: web.Request, model: str | None = None) -> web.StreamResponse:
    """Transcribe the uploaded file, per settings and directives in the `prompt` field; `model`,
    when given, is the model whatever the ``model`` field says (a cloud's deployment names it)."""
    try:
        fields, audio = await read_form(request)
        call = transcription_of({**fields, "model": model} if model else fields, audio)
        directives = media_directives([call.prompt], NO_ANSWER_DIRECTIVES)
    except BadRequest as exc:
        return bad_request(exc)
    refused = await refusal(request, media_plan(request.app[SETTINGS_KEY], directives))
    return refused if refused is not None else transcription_answer(call, directives)


def add_routes(app: web.Application) -> None:
    """Mount the OpenAI speech and transcription routes."""
    app.router.add_post(SPEECH_PATH, create_speech)
    app.router.add_post(TRANSCRIPTIONS_PATH, create_transcription)
