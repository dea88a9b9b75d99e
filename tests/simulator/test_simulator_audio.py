"""The simulator's OpenAI embeddings, speech and transcription routes, over real sockets."""

import base64
import hashlib
import math
import struct

import aiohttp
import pytest

from simulator.mp3 import frames_for, id3_tag, mp3_duration_s, silent_frames, silent_mp3
from simulator.openai_audio import Mp3Clock, split
from simulator.textgen import completion_text
from tests.support import transcription_form

AUTH = {"Authorization": "Bearer sk-test"}
EMBED, SPEECH, TRANSCRIBE = "/v1/embeddings", "/v1/audio/speech", "/v1/audio/transcriptions"


async def embed(client, **body) -> aiohttp.ClientResponse:
    return await client.post(EMBED, json={"model": "text-embedding-3-small", **body}, headers=AUTH)


async def recorded(client) -> list[dict]:
    return (await (await client.get("/_sim/requests")).json())["data"]


async def transcribe(client, audio: bytes, **fields: str) -> aiohttp.ClientResponse:
    return await client.post(TRANSCRIBE, data=transcription_form(audio, **fields), headers=AUTH)


# -- embeddings ----------------------------------------------------------------------------------

async def test_embeddings_are_deterministic_unit_float32_vectors(make_client):
    client = await make_client()
    body = await (await embed(client, input=["the cat sat", "a dog"])).json()
    again = await (await embed(client, input="the cat sat")).json()
    first, second = (item["embedding"] for item in body["data"])
    assert [item["index"] for item in body["data"]] == [0, 1]
    assert len(first) == 1536 and first != second
    assert again["data"][0]["embedding"] == first
    assert math.isclose(math.fsum(v * v for v in first), 1.0, rel_tol=1e-5)
    assert list(struct.unpack("<1536f", struct.pack("<1536f", *first))) == first  # exact float32s
    assert body["usage"] == {"prompt_tokens": 5, "total_tokens": 5}  # words of the inputs
    assert body["object"] == "list" and body["model"] == "text-embedding-3-small"


async def test_base64_embeddings_hold_the_same_float32_values(make_client):
    client = await make_client()
    floats = (await (await embed(client, input="hello", dimensions=8)).json())["data"][0]["embedding"]
    encoded = (await (await embed(client, input="hello", dimensions=8, encoding_format="base64")).json())
    raw = base64.b64decode(encoded["data"][0]["embedding"])
    assert list(struct.unpack("<8f", raw)) == floats


async def test_dimensions_and_model_size_are_honoured(make_client):
    client = await make_client()
    small = (await (await embed(client, input="x", dimensions=3)).json())["data"][0]["embedding"]
    large = await (await client.post(EMBED, json={"model": "text-embedding-3-large", "input": "x"},
                                     headers=AUTH)).json()
    assert len(small) == 3 and len(large["data"][0]["embedding"]) == 3072


async def test_token_array_inputs_count_their_tokens(make_client):
    client = await make_client()
    body = await (await embed(client, input=[[1, 2, 3], [4, 5]])).json()
    assert len(body["data"]) == 2 and body["usage"]["prompt_tokens"] == 5


@pytest.mark.parametrize("body", [{"input": ""}, {"input": []}, {"input": "x", "dimensions": 0},
                                  {"input": ["a", 1]}, {"input": "x", "encoding_format": "hex"}])
async def test_invalid_embedding_requests_are_400(make_client, body):
    client = await make_client()
    response = await embed(client, **body)
    assert response.status == 400
    assert (await response.json())["error"]["type"] == "invalid_request_error"


async def test_embedding_directives_simulate_failures(make_client):
    client = await make_client()
    assert (await embed(client, input="x [sim:status=503]")).status == 503
    with pytest.raises(aiohttp.ClientError):
        await (await embed(client, input="x [sim:drop_after=0]")).read()
    assert [r["outcome"] for r in await recorded(client)] == ["error", "dropped"]


# -- speech --------------------------------------------------------------------------------------

async def test_speech_streams_real_mp3_lasting_in_proportion_to_the_input(make_client):
    client = await make_client()
    text = "x" * 200
    response = await client.post(SPEECH, json={"model": "tts-1", "input": text, "voice": "alloy"}, headers=AUTH)
    audio = await response.read()
    assert response.status == 200 and response.headers["Content-Type"] == "audio/mpeg"
    assert audio == silent_frames(frames_for(200 * 0.06))
    assert mp3_duration_s(audio) == pytest.approx(12.0, abs=0.03)
    assert (await recorded(client))[-1]["outcome"] == "completed"


async def test_speech_speed_shortens_the_audio(make_client):
    client = await make_client()
    response = await client.post(SPEECH, headers=AUTH,
                                 json={"model": "tts-1", "input": "x" * 200, "voice": "alloy", "speed": 2.0})
    assert mp3_duration_s(await response.read()) == pytest.approx(6.0, abs=0.03)


@pytest.mark.parametrize(("response_format", "content_type"), [
    ("wav", "audio/wav"), ("pcm", "audio/pcm"), ("opus", "audio/opus"), ("flac", "audio/flac"),
])
async def test_speech_formats_carry_their_content_type(make_client, response_format, content_type):
    client = await make_client()
    response = await client.post(SPEECH, headers=AUTH, json={"model": "tts-1", "input": "hello", "voice": "echo",
                                                             "response_format": response_format})
    audio = await response.read()
    assert response.headers["Content-Type"] == content_type
    if response_format == "wav":
        assert audio[:4] == b"RIFF" and audio[8:12] == b"WAVE"
        assert struct.unpack("<I", audio[40:44])[0] == len(audio) - 44 == 2 * round(5 * 0.06 * 24_000)


async def test_speech_hang_after_sends_the_first_pieces_then_waits(make_client):
    client = await make_client()
    text = "x" * 100 + " [sim:hang_after=2]"
    audio = silent_frames(frames_for(len(text) * 0.06))
    expected = b"".join(split(audio, 8)[:2])
    response = await client.post(SPEECH, json={"model": "tts-1", "input": text, "voice": "alloy"}, headers=AUTH)
    received = b""
    while len(received) < len(expected):
        received += await response.content.readany()
    assert received == expected
    response.close()


async def test_speech_drop_after_cuts_the_connection(make_client):
    client = await make_client()
    response = await client.post(SPEECH, headers=AUTH,
                                 json={"model": "tts-1", "input": "hi [sim:drop_after=1]", "voice": "alloy"})
    with pytest.raises(aiohttp.ClientPayloadError):
        await response.read()


@pytest.mark.parametrize("body", [
    {"input": "", "voice": "alloy"}, {"input": "x" * 4097, "voice": "alloy"}, {"input": "x"},
    {"input": "x", "voice": "alloy", "speed": 5}, {"input": "x", "voice": "alloy", "response_format": "ogg"},
])
async def test_invalid_speech_requests_are_400(make_client, body):
    client = await make_client()
    response = await client.post(SPEECH, json={"model": "tts-1", **body}, headers=AUTH)
    assert response.status == 400


async def test_speech_status_directive(make_client):
    client = await make_client()
    response = await client.post(SPEECH, headers=AUTH,
                                 json={"model": "tts-1", "input": "x [sim:status=429]", "voice": "alloy"})
    assert response.status == 429 and response.headers["Retry-After"] == "1"


# -- transcription -------------------------------------------------------------------------------

async def test_transcription_of_mp3_reports_its_duration_and_records_the_upload(make_client):
    client = await make_client()
    audio = silent_mp3(7.5, {"title": "talk"})
    response = await transcribe(client, audio, language="en")
    body = await response.json()
    assert response.status == 200
    assert body == {"text": completion_text(15).strip(), "usage": {"type": "duration", "seconds": 8}}
    (record,) = await recorded(client)
    assert record["body"] == {"model": "whisper-1", "language": "en", "file": {
        "filename": "talk.mp3", "content_type": "audio/mpeg", "bytes": len(audio),
        "sha256": hashlib.sha256(audio).hexdigest()}}
    assert record["outcome"] == "completed"


async def test_file_before_model_is_read_too(make_client):
    client = await make_client()
    audio = silent_mp3(2)
    response = await client.post(TRANSCRIBE, data=transcription_form(audio, file_first=True), headers=AUTH)
    assert (await response.json())["usage"]["seconds"] == math.ceil(mp3_duration_s(audio)) == 3


async def test_audio_that_is_not_mp3_lasts_by_its_size(make_client):
    client = await make_client()
    body = await (await transcribe(client, bytes(40_000))).json()
    assert body["usage"] == {"type": "duration", "seconds": 3}  # 40 000 / 16 000 = 2.5


async def test_verbose_json_has_duration_and_segments(make_client):
    client = await make_client()
    body = await (await transcribe(client, silent_mp3(12), response_format="verbose_json")).json()
    assert body["duration"] == pytest.approx(12, abs=0.03) and body["language"] == "english"
    assert [(s["start"], s["text"]) for s in body["segments"]][:2] == [
        (0.0, " " + completion_text(10).strip()), (5.0, " " + completion_text(20).strip().split(" ", 10)[10])]
    assert " ".join(s["text"].strip() for s in body["segments"]) == body["text"]


@pytest.mark.parametrize(("response_format", "start"), [
    ("text", completion_text(4).strip() + "\n"),
    ("srt", "1\n00:00:00,000 --> 00:00:02,"),
    ("vtt", "WEBVTT\n\n00:00:00.000 --> 00:00:02."),
])
async def test_text_formats(make_client, response_format, start):
    client = await make_client()
    response = await transcribe(client, silent_mp3(2), response_format=response_format)
    assert response.headers["Content-Type"].startswith("text/plain")
    assert (await response.text()).startswith(start)


async def test_gpt_4o_transcription_reports_tokens(make_client):
    client = await make_client()
    body = await (await transcribe(client, bytes(32_000), model="gpt-4o-transcribe", prompt="two words")).json()
    assert body["usage"] == {"type": "tokens", "input_tokens": 22, "output_tokens": 4, "total_tokens": 26,
                             "input_token_details": {"text_tokens": 2, "audio_tokens": 20}}


async def test_transcription_without_model_or_file_is_400(make_client):
    client = await make_client()
    no_file = aiohttp.FormData({"model": "whisper-1"})
    no_model = aiohttp.FormData()
    no_model.add_field("file", b"abc", filename="a.wav")
    for data in (no_file, no_model):
        assert (await client.post(TRANSCRIBE, data=data, headers=AUTH)).status == 400
    assert (await client.post(TRANSCRIBE, json={"model": "whisper-1"}, headers=AUTH)).status == 400


async def test_transcription_directives_come_from_the_prompt(make_client):
    client = await make_client()
    response = await transcribe(client, silent_mp3(1), prompt="[sim:status=500]")
    assert response.status == 500


def test_mp3_clock_fed_in_pieces_agrees_with_the_frame_walker():
    audio = id3_tag({"a": "b" * 300}) + silent_frames(500)
    for size in (1, 7, 209, 4096):
        clock = Mp3Clock()
        for start in range(0, len(audio), size):
            clock.feed(audio[start:start + size])
        assert clock.frames == 500 and clock.duration_s == pytest.approx(mp3_duration_s(audio))
    clock = Mp3Clock()
    clock.feed(b"RIFF" + bytes(100))
    assert clock.duration_s is None
