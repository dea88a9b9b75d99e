"""Audio's routes, both paid: POST /v1/audio/speech (the audio streamed back) and
POST /v1/audio/transcriptions (a multipart upload, read part by part: the file goes upstream as it
arrives, see gateway.audio.upload)."""

from aiohttp import web

from gateway.audio import speech, transcription, upload
from gateway.edge.bodies import parse_body
from gateway.edge.routes import Endpoint, JsonBody
from gateway.edge.state import CALLER, FACTS, SERVICES

SPEECH_BODY = JsonBody(speech.SpeechRequest, speech.BODY_BYTES)
TEXT = {"type": "string"}


async def create_speech(request: web.Request) -> web.StreamResponse:
    raw, parsed = await parse_body(request, SPEECH_BODY)
    request[FACTS].update(model=parsed.model, stream=True)
    relay = await speech.open_speech(request.app[SERVICES], request[CALLER], raw, parsed)
    return await relay.send(request)


async def create_transcription(request: web.Request) -> web.Response:
    """Multipart, read part by part: the file goes upstream as it arrives (see gateway.audio.upload)."""
    form = await upload.open_form(request)
    body, content_type = await transcription.transcribe(request.app[SERVICES], request[CALLER], form)
    charset = "utf-8" if content_type == "text/plain" else None
    return web.Response(body=body, content_type=content_type, charset=charset)


def transcription_form() -> dict:
    """The upload's multipart schema, for the OpenAPI document."""
    fields = {"model": dict(TEXT), "language": dict(TEXT), "prompt": dict(TEXT),
              "response_format": {"enum": list(transcription.UPSTREAM_FORMATS)},
              "temperature": {"type": "number", "minimum": 0, "maximum": 1}}
    return {"type": "object", "required": [upload.FILE_FIELD, "model"],
            "properties": {upload.FILE_FIELD: {"type": "string", "contentMediaType": "application/octet-stream",
                                               "maxLength": upload.MAX_FILE_BYTES}, **fields}}


ENDPOINTS = (
    Endpoint("POST", speech.ROUTE, create_speech, "Speech, streamed", body=SPEECH_BODY, paid=True,
             model_kind="speech", kind_home=True, answers={"200": ("audio/mpeg",)}),
    Endpoint("POST", transcription.ROUTE, create_transcription, "Transcription of an uploaded file", paid=True,
             expect_handler=upload.expect_continue, model_kind="transcription", kind_home=True,
             form=transcription_form(), answers={"200": ("application/json", "text/plain")}),
)
