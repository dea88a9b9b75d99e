"""POST /v1/audio/transcriptions: the upload is streamed to the provider, the transcript billed.

Billing is by the provider's unit: per minute of audio (catalogue `pricing.audio_per_minute`,
on the seconds the provider reports, exactly) or, where it reports tokens, per token. The
plain-text formats carry no usage, so upstream is asked for JSON instead and the gateway
renders `text`, `srt` and `vtt` itself (subtitles from the segments of `verbose_json`).
"""

from decimal import Decimal

from gateway.accounts import key_policy
from gateway.audio import upload
from gateway.billing import ceilings
from gateway.billing.charging import failed, outcome, record, refused
from gateway.billing.pricing import Cost, cost_fields, minutes_cost, model_cost
from gateway.catalogue import Resolved
from gateway.edge.errors import UpstreamError, bad_request
from gateway.jsonio import encode
from gateway.providers.base import TranscriptionCall, TranscriptionReply
from gateway.providers.capabilities import TranscriptionProvider
from gateway.resolution import TRANSCRIPTION, Served, resolve
from gateway.routing import failover
from gateway.services import Caller, Services
from gateway.providers.usage import Usage

ROUTE = "/v1/audio/transcriptions"
# What the client asks for -> what upstream is asked for (a format that reports usage).
UPSTREAM_FORMATS = {"json": "json", "verbose_json": "verbose_json", "text": "json",
                    "srt": "verbose_json", "vtt": "verbose_json"}
FALSE_WORDS = frozenset({"", "false", "0"})


def check_field(name: str, value: str) -> str:
    """Validate one form field (400 naming it); returns the value to send upstream."""
    if name == "response_format":
        if value not in UPSTREAM_FORMATS:
            raise bad_request(f"response_format must be one of {', '.join(UPSTREAM_FORMATS)}", name)
        return UPSTREAM_FORMATS[value]
    if name == "temperature" and not _number_between(value, 0, 1):
        raise bad_request("temperature must be a number from 0 to 1", name)
    if name == "stream" and value.strip().lower() not in FALSE_WORDS:
        raise bad_request("streamed transcriptions are not supported; leave stream false", name)
    return value


def _number_between(text: str, low: float, high: float) -> bool:
    try:
        return low <= float(text) <= high
    except ValueError:
        return False


def transcription_cost(model: Resolved, reply: TranscriptionReply, rate: Decimal) -> tuple[Usage, Cost]:
    """Tokens at the token prices, or seconds / 60 at the per-minute price; INR at `rate`.
    A reply reporting neither costs nothing."""
    if reply.usage is not None:
        return reply.usage, model_cost(model.prices, reply.usage, rate)
    return Usage(), minutes_cost(model.prices, reply.seconds or Decimal(0), rate)


def timestamp(seconds: object, separator: str) -> str:
    """HH:MM:SS,mmm (SRT) or HH:MM:SS.mmm (WebVTT)."""
    millis = round(seconds * 1000) if isinstance(seconds, int | float) and seconds > 0 else 0
    hours, rest = divmod(millis, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    return f"{hours:02d}:{minutes:02d}:{rest // 1000:02d}{separator}{rest % 1000:03d}"


def subtitles(segments: list, vtt: bool) -> str:
    """SRT or WebVTT cues, one per transcript segment."""
    separator = "." if vtt else ","
    cues = []
    for number, segment in enumerate(s for s in segments if isinstance(s, dict)):
        cue = (f"{timestamp(segment.get('start'), separator)} --> {timestamp(segment.get('end'), separator)}\n"
               f"{str(segment.get('text') or '').strip()}\n")
        cues.append(cue if vtt else f"{number + 1}\n{cue}")
    return ("WEBVTT\n\n" if vtt else "") + "\n".join(cues)


def render(body: dict, response_format: str, usage: dict) -> tuple[bytes, str]:
    """The answer in the format the client asked for, with its content type."""
    if response_format in ("json", "verbose_json"):
        return encode({**body, "usage": usage}), "application/json"
    if response_format == "text":
        return f"{body.get('text') or ''}\n".encode(), "text/plain"
    return subtitles(body.get("segments") or [], response_format == "vtt").encode(), "text/plain"


# An upload's size bounds its duration for the reservation, taking audio at 32 kbit/s (the low end
# of speech codecs' usual rates: a file coded below it holds more audio than reserved, and its
# charge stops at what was held) and at most 50 audio tokens a second (one per 20 ms frame).
AUDIO_BYTES_PER_SECOND = 4000
AUDIO_TOKENS_PER_SECOND = 50


def ceiling(services: Services, model: Resolved, upload_bytes: int) -> int:
    """The most a transcription of an upload of `upload_bytes` can cost on `model`."""
    seconds = Decimal(upload_bytes) / AUDIO_BYTES_PER_SECOND
    if model.prices.audio_per_minute:
        return ceilings.per_minute(services, model, seconds)
    audio_tokens = int(seconds * AUDIO_TOKENS_PER_SECOND) + 1
    return ceilings.tokens(services, model, audio_tokens, ceilings.output_limit(model))


async def transcribe(services: Services, caller: Caller, form: upload.Form) -> tuple[bytes, str]:
    """Read the form, stream it upstream, bill the transcript; returns the body and its type."""
    try:
        return await _transcribe(services, caller, form)
    finally:
        form.close()


async def _transcribe(services: Services, caller: Caller, form: upload.Form) -> tuple[bytes, str]:
    await form.read_head()
    requested = form.value("model")
    if not requested:
        raise bad_request("the form has no `model` part", "model")
    [served] = await key_policy.permitted(services, caller, ROUTE, requested,
                                          [resolve(services, requested, TRANSCRIPTION)])
    model = served.model
    if not form.has_file:
        raise bad_request("the form has no `file` part with the audio", "file")
    for name, value in form.fields:
        check_field(name, value)
    api_key = await failover.hold_attempt(services, caller, ROUTE, model,
                                          lambda m: ceiling(services, m, form.size_bound))
    call = TranscriptionCall(caller.request_id, model.upstream_model, form.parts(check_field), api_key)
    reply = await _call_upstream(services, caller, served, form, call)
    usage, cost = transcription_cost(model, reply, services.config.billing.usd_to_inr)
    await record(services, caller, outcome(ROUTE, model, 200, usage, cost, byok=bool(api_key)),
                 {"request": form.value("prompt"), "response": reply.body.get("text")})
    reported = reply.body.get("usage")
    usage_fields = {**(reported if isinstance(reported, dict) else {}), **cost_fields(cost)}
    return render(reply.body, form.value("response_format") or "json", usage_fields)


async def _call_upstream(services: Services, caller: Caller, served: Served[TranscriptionProvider],
                         form: upload.Form, call: TranscriptionCall) -> TranscriptionReply:
    try:
        return await served.provider.transcribe(call)
    except UpstreamError as exc:
        if form.failure is not None:  # the client's upload broke the request, not the provider
            raise await refused(services, caller, ROUTE, served.model, form.failure) from None
        raise await failed(services, caller, ROUTE, served.model, form.value("model") or "", exc) from None
