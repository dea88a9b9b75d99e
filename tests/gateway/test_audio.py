"""POST /v1/audio/speech and /v1/audio/transcriptions through the gateway against the simulator."""

import asyncio
import hashlib
import io
import json
import math
import tracemalloc
from decimal import Decimal

import aiohttp
import msgspec
import pytest

from gateway.accounts import admin
from gateway.catalogue import SHIPPED_PATH
from gateway.accounts.sealing import Sealer
from gateway.audio.upload import MAX_FILE_BYTES
from simulator.mp3 import CYCLE_BYTES, CYCLE_FRAMES, FRAME_DURATION_S, frames_for, mp3_duration_s, silent_frames, \
    silent_mp3
from simulator.openai_audio import split
from simulator.textgen import completion_text
from tests.support import auth, decimal_json, request_events, transcription_form, upstream_requests

openai = pytest.importorskip("openai")

CHAR_PRICE = Decimal("0.000015")  # tts-1, USD per input character
MINUTE_PRICE = Decimal("0.006")  # whisper-1, USD per minute of audio
RATE = Decimal("84.0")
SPEECH, TRANSCRIBE = "/v1/audio/speech", "/v1/audio/transcriptions"


@pytest.fixture
def client(gateway, org):
    return openai.AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=org["api_key"], max_retries=0)


async def wait_for(probe, accept=bool, timeout: float = 30.0):  # generous: a loaded machine is slow
    deadline = asyncio.get_running_loop().time() + timeout
    while not accept(value := await probe()) and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.05)
    return value


def speech_body(text: str = "hello there", **extra) -> dict:
    return {"model": "tts-1", "input": text, "voice": "alloy", **extra}


def speech_audio(text: str) -> bytes:
    """The simulator's MP3 for `text` (0.06 s a character)."""
    return silent_frames(frames_for(len(text) * 0.06))


def minute_cost(audio: bytes) -> Decimal:
    """whisper-1's price of an MP3: the whole seconds the simulator reports, per minute."""
    return math.ceil(mp3_duration_s(audio)) * MINUTE_PRICE / 60


# -- speech --------------------------------------------------------------------------------------

async def test_sdk_speech_returns_the_audio_and_bills_per_character(client, gateway, org, simulator):
    text = "The quick brown fox jumps over the lazy dog."
    reply = await client.audio.speech.create(model="tts-1", voice="alloy", input=text)
    assert reply.content == speech_audio(text)
    assert reply.response.headers["content-type"] == "audio/mpeg"
    cost = len(text) * CHAR_PRICE
    assert await gateway.balance(org["org_id"]) == Decimal(100) - cost * RATE
    (event,) = await request_events(gateway)
    assert (event.route, event.model, event.status, event.prompt_tokens) == (SPEECH, "tts-1", 200, len(text))
    assert event.charged_inr_nano == event.cost_inr_nano
    (sent,) = await upstream_requests(gateway, simulator)
    assert sent["body"] == {"model": "tts-1", "input": text, "voice": "alloy"}
    assert sent["headers"]["authorization"].startswith("Bearer sk-sim-provider")


async def test_optional_fields_pass_through_and_content_type_follows_the_format(gateway, org, simulator):
    body = speech_body("hi", response_format="wav", speed=1.5, instructions="calm", voice={"id": "voice_1"})
    response = await gateway.client.post(SPEECH, json=body, headers=auth(org["api_key"]))
    audio = await response.read()
    assert response.status == 200 and response.headers["Content-Type"] == "audio/wav"
    assert audio[:4] == b"RIFF"
    assert (await upstream_requests(gateway, simulator))[0]["body"] == body


async def test_first_audio_bytes_reach_the_client_while_upstream_is_still_producing(gateway, org, simulator):
    # The simulator sends two pieces and then goes silent: the client can only hold those bytes
    # if the gateway relays them as they arrive.
    text = "x" * 300 + " [sim:hang_after=2]"
    expected = b"".join(split(speech_audio(text), 8)[:2])
    response = await gateway.client.post(SPEECH, json=speech_body(text), headers=auth(org["api_key"]))
    assert response.status == 200
    received = b""
    while len(received) < len(expected):
        received += await asyncio.wait_for(response.content.readany(), 5)
    assert received == expected
    response.close()
    (event,) = await wait_for(lambda: request_events(gateway))
    assert event.status == 499 and event.prompt_tokens == len(text)  # the provider bills the accepted input
    assert event.charged_inr_nano == event.cost_inr_nano > 0
    outcome = await wait_for(lambda: upstream_requests(gateway, simulator), lambda r: r[0]["outcome"] != "pending")
    assert outcome[0]["outcome"] == "disconnected"  # the upstream request was abandoned too


@pytest.mark.parametrize(("directive", "status"), [
    ("[sim:status=429]", 429), ("[sim:status=500]", 502), ("[sim:drop_after=0]", 502),
])
async def test_failure_before_any_byte_is_a_gateway_error_not_charged(gateway, org, directive, status):
    response = await gateway.client.post(SPEECH, json=speech_body(f"hi {directive}"), headers=auth(org["api_key"]))
    assert response.status == status
    assert response.headers["Content-Type"].startswith("application/json")
    error = (await response.json())["error"]
    assert (error["type"], error["usedProvider"], error["requestedModel"]) == ("gateway_error", "openai", "tts-1")
    assert await gateway.balance(org["org_id"]) == Decimal(100)
    (event,) = await request_events(gateway)
    assert (event.status, event.charged_inr_nano) == (status, 0)


async def test_failure_mid_stream_cuts_the_client_off_and_is_not_charged(gateway, org):
    response = await gateway.client.post(SPEECH, json=speech_body("x" * 300 + " [sim:drop_after=2]"),
                                         headers=auth(org["api_key"]))
    assert response.status == 200
    with pytest.raises(aiohttp.ClientPayloadError):
        await response.read()
    (event,) = await wait_for(lambda: request_events(gateway))
    assert (event.status, event.charged_inr_nano) == (502, 0)
    assert await gateway.balance(org["org_id"]) == Decimal(100)


@pytest.mark.parametrize(("body", "param"), [
    (speech_body("x" * 4097), "input"),
    (speech_body(""), "input"),
    ({"model": "tts-1", "input": "x"}, "voice"),
    (speech_body(speed=4.5), "speed"),
    (speech_body(speed=0.1), "speed"),
    (speech_body(response_format="ogg"), "response_format"),
    (speech_body(stream_format="sse"), "stream_format"),
    ({**speech_body(), "model": "gpt-4o-mini"}, "model"),
])
async def test_invalid_speech_requests_are_400_without_upstream_call(gateway, org, simulator, body, param):
    response = await gateway.client.post(SPEECH, json=body, headers=auth(org["api_key"]))
    assert response.status == 400
    assert (await response.json())["error"]["param"] == param
    assert await upstream_requests(gateway, simulator) == []


async def test_4096_characters_are_accepted(gateway, org):
    response = await gateway.client.post(SPEECH, json=speech_body("y" * 4096), headers=auth(org["api_key"]))
    assert response.status == 200 and await response.read() == speech_audio("y" * 4096)


# -- transcription -------------------------------------------------------------------------------

async def test_sdk_transcribes_an_mp3_billed_per_minute(client, gateway, org, simulator):
    audio = silent_mp3(9.4)
    reply = await client.audio.transcriptions.create(model="whisper-1", file=("talk.mp3", audio, "audio/mpeg"))
    seconds = math.ceil(mp3_duration_s(audio))
    assert reply.text == completion_text(round(mp3_duration_s(audio) * 2)).strip()
    assert (reply.usage.type, reply.usage.seconds) == ("duration", seconds)
    cost = minute_cost(audio)
    assert Decimal(str(reply.usage.model_extra["cost"])) == cost
    assert await gateway.balance(org["org_id"]) == Decimal(100) - cost * RATE
    (sent,) = await upstream_requests(gateway, simulator)
    assert sent["body"] == {"model": "whisper-1", "file": {
        "filename": "talk.mp3", "content_type": "audio/mpeg", "bytes": len(audio),
        "sha256": hashlib.sha256(audio).hexdigest()}}
    (event,) = await request_events(gateway)
    assert (event.route, event.model, event.status) == (TRANSCRIBE, "whisper-1", 200)
    assert event.charged_inr_nano == event.cost_inr_nano


@pytest.mark.parametrize("file_first", [False, True], ids=["streamed", "spooled"])
async def test_fields_are_forwarded_whatever_their_order(gateway, org, simulator, file_first):
    audio = silent_mp3(3)
    data = transcription_form(audio, file_first=file_first, language="en", prompt="names: Ada", temperature="0.2")
    response = await gateway.client.post(TRANSCRIBE, data=data, headers=auth(org["api_key"]))
    body = decimal_json(await response.read())
    assert response.status == 200
    cost = minute_cost(audio)
    assert body["usage"] == {"type": "duration", "seconds": math.ceil(mp3_duration_s(audio)), "cost": cost,
                             "cost_inr": cost * RATE, "usd_to_inr": RATE}
    (sent,) = await upstream_requests(gateway, simulator)
    assert sent["body"] == {"model": "whisper-1", "language": "en", "prompt": "names: Ada", "temperature": "0.2",
                            "file": {"filename": "talk.mp3", "content_type": "audio/mpeg", "bytes": len(audio),
                                     "sha256": hashlib.sha256(audio).hexdigest()}}


async def test_fields_after_a_streamed_file_follow_it_upstream(gateway, org, simulator):
    writer = aiohttp.MultipartWriter("form-data")
    writer.append("whisper-1").set_content_disposition("form-data", name="model")
    writer.append(silent_mp3(2)).set_content_disposition("form-data", name="file", filename="a.mp3")
    writer.append("text").set_content_disposition("form-data", name="response_format")
    response = await gateway.client.post(TRANSCRIBE, data=writer, headers=auth(org["api_key"]))
    assert await response.text() == completion_text(4).strip() + "\n"
    assert (await upstream_requests(gateway, simulator))[0]["body"]["response_format"] == "json"


async def test_verbose_json_passes_through_with_cost(gateway, org, simulator):
    audio = silent_mp3(12)
    response = await gateway.client.post(TRANSCRIBE, data=transcription_form(audio, response_format="verbose_json"),
                                         headers=auth(org["api_key"]))
    body = decimal_json(await response.read())
    assert body["duration"] == Decimal(str(round(mp3_duration_s(audio), 3)))
    assert len(body["segments"]) == 3 and body["usage"]["cost"] == minute_cost(audio)


@pytest.mark.parametrize("response_format", ["srt", "vtt"])
async def test_subtitles_match_what_the_provider_itself_would_send(gateway, org, simulator, response_format):
    audio = silent_mp3(12)
    response = await gateway.client.post(TRANSCRIBE, data=transcription_form(audio, response_format=response_format),
                                         headers=auth(org["api_key"]))
    assert response.headers["Content-Type"] == "text/plain; charset=utf-8"
    direct = await gateway.client.session.post(simulator.make_url(TRANSCRIBE), headers=auth("sk-direct"),
                                               data=transcription_form(audio, response_format=response_format))
    assert await response.text() == await direct.text()
    sent = (await upstream_requests(gateway, simulator))[0]
    assert sent["body"]["response_format"] == "verbose_json"  # the format that reports the duration
    (event,) = await request_events(gateway)
    assert event.cost_usd_nano == int(minute_cost(audio) * 10**9)


async def _big_file(size: int, piece: bytes):
    for _ in range(size // len(piece)):
        yield piece


def streamed_upload(size: int, *, file_first: bool = False) -> aiohttp.MultipartWriter:
    """A form whose MP3 file is produced in pieces as it is sent (no Content-Length)."""
    writer = aiohttp.MultipartWriter("form-data")

    def add_model() -> None:
        writer.append("whisper-1").set_content_disposition("form-data", name="model")

    def add_file() -> None:
        file = writer.append(_big_file(size, silent_frames(CYCLE_FRAMES * 6)), {"Content-Type": "audio/mpeg"})
        file.set_content_disposition("form-data", name="file", filename="long.mp3")

    for add in (add_file, add_model) if file_first else (add_model, add_file):
        add()
    return writer


async def test_a_20_mb_upload_streams_through_in_bounded_memory(gateway, org, simulator):
    size = 20 * 1024 * 1024 // (CYCLE_BYTES * 6) * CYCLE_BYTES * 6
    tracemalloc.start()
    try:
        response = await gateway.client.post(TRANSCRIBE, data=streamed_upload(size), headers=auth(org["api_key"]))
        body = decimal_json(await response.read())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert response.status == 200, body
    assert peak < 4 * 1024 * 1024, f"peak {peak} bytes"  # the 20 MB never sat in memory
    (sent,) = await upstream_requests(gateway, simulator)
    assert sent["body"]["file"]["bytes"] == size
    seconds = math.ceil(size // CYCLE_BYTES * CYCLE_FRAMES * FRAME_DURATION_S)
    assert body["usage"]["seconds"] == seconds and body["usage"]["cost"] == seconds * MINUTE_PRICE / 60


async def test_a_26_mb_upload_with_its_length_declared_is_413_before_any_upstream_call(gateway, org, simulator):
    data = transcription_form(bytes(26 * 1024 * 1024))
    response = await gateway.client.post(TRANSCRIBE, data=data, headers=auth(org["api_key"]))
    assert response.status == 413
    assert (await response.json())["error"]["param"] == "file"
    assert await upstream_requests(gateway, simulator) == []
    assert await gateway.balance(org["org_id"]) == Decimal(100)


async def test_an_upload_expecting_100_continue_is_told_413_before_sending_its_body(gateway, org, simulator):
    # As curl does for large uploads: the headers alone; the first answer must be the 413, not
    # the "100 Continue" that would invite 26 MB only to refuse them.
    reader, writer = await asyncio.open_connection(gateway.server.host, gateway.server.port)
    writer.write(f"POST {TRANSCRIBE} HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer {org['api_key']}\r\n"
                 f"Content-Type: multipart/form-data; boundary=b\r\nContent-Length: {26 * 1024 * 1024}\r\n"
                 "Expect: 100-continue\r\n\r\n".encode())
    status_line = await asyncio.wait_for(reader.readline(), 5)
    writer.close()
    assert status_line.startswith(b"HTTP/1.1 413")
    small = await gateway.client.post(TRANSCRIBE, data=transcription_form(silent_mp3(1)), expect100=True,
                                      headers=auth(org["api_key"]))
    assert small.status == 200
    assert len(await upstream_requests(gateway, simulator)) == 1


async def test_a_multipart_body_without_boundary_is_400(gateway, org):
    response = await gateway.client.post(TRANSCRIBE, data=b"--x\r\n", headers={
        **auth(org["api_key"]), "Content-Type": "multipart/form-data"})
    assert response.status == 400 and (await response.json())["error"]["param"] == "file"


async def test_a_spooled_upload_past_25_mb_is_413_without_upstream_call(gateway, org, simulator):
    size = (MAX_FILE_BYTES // (CYCLE_BYTES * 6) + 2) * CYCLE_BYTES * 6
    response = await gateway.client.post(TRANSCRIBE, data=streamed_upload(size, file_first=True),
                                         headers=auth(org["api_key"]))
    assert response.status == 413
    assert await upstream_requests(gateway, simulator) == []


async def test_a_streamed_upload_past_25_mb_is_413_and_abandons_the_upstream_call(gateway, org, simulator):
    size = (MAX_FILE_BYTES // (CYCLE_BYTES * 6) + 2) * CYCLE_BYTES * 6
    response = await gateway.client.post(TRANSCRIBE, data=streamed_upload(size), headers=auth(org["api_key"]))
    assert response.status == 413
    (event,) = await request_events(gateway)
    assert (event.status, event.charged_inr_nano) == (413, 0)
    sent = await wait_for(lambda: upstream_requests(gateway, simulator), lambda r: r[0]["outcome"] != "pending")
    assert sent[0]["outcome"] != "completed"


@pytest.mark.parametrize(("directive", "status"), [("[sim:status=429]", 429), ("[sim:status=503]", 502)])
async def test_transcription_upstream_failures_are_mapped_and_not_charged(gateway, org, directive, status):
    response = await gateway.client.post(TRANSCRIBE, data=transcription_form(silent_mp3(1), prompt=directive),
                                         headers=auth(org["api_key"]))
    assert response.status == status
    error = (await response.json())["error"]
    assert (error["type"], error["usedProvider"], error["requestedModel"]) == ("gateway_error", "openai", "whisper-1")
    assert await gateway.balance(org["org_id"]) == Decimal(100)
    (event,) = await request_events(gateway)
    assert (event.status, event.charged_inr_nano) == (status, 0)


def _without(part: str) -> aiohttp.FormData:
    data = aiohttp.FormData()
    if part != "model":
        data.add_field("model", "whisper-1")
    if part != "file":
        data.add_field("file", b"abc", filename="a.wav")
    return data


@pytest.mark.parametrize(("data", "param"), [
    (_without("model"), "model"),
    (_without("file"), "file"),
    (transcription_form(b"abc", model="gpt-4o-mini"), "model"),
    (transcription_form(b"abc", response_format="xml"), "response_format"),
    (transcription_form(b"abc", temperature="hot"), "temperature"),
    (transcription_form(b"abc", stream="true"), "stream"),
])
async def test_invalid_transcription_forms_are_400_without_upstream_call(gateway, org, simulator, data, param):
    response = await gateway.client.post(TRANSCRIBE, data=data, headers=auth(org["api_key"]))
    assert response.status == 400
    assert (await response.json())["error"]["param"] == param
    assert await upstream_requests(gateway, simulator) == []


async def test_a_body_that_is_not_multipart_is_400(gateway, org):
    response = await gateway.client.post(TRANSCRIBE, json={"model": "whisper-1"}, headers=auth(org["api_key"]))
    assert response.status == 400 and (await response.json())["error"]["param"] == "file"


async def test_token_priced_transcription_is_billed_by_tokens(make_gateway, config, tmp_path):
    shipped = json.loads(SHIPPED_PATH.read_text())
    [whisper] = [r for r in shipped["data"] if r["id"] == "whisper-1"]
    prices = {"prompt": "0.0000025", "completion": "0.00001"}
    record = {**whisper, "id": "gpt-4o-transcribe",
              "pricing": {**whisper["pricing"], **prices, "audio_per_minute": "0"},
              "providers": [{**whisper["providers"][0], "modelName": "gpt-4o-transcribe",
                             "pricing": {**whisper["providers"][0]["pricing"], **prices}}]}
    path = tmp_path / "catalogue.json"
    path.write_text(json.dumps({"data": [record]}))
    gateway = await make_gateway(msgspec.structs.replace(
        config, catalogue=msgspec.structs.replace(config.catalogue, path=str(path))))
    org = await gateway.new_org("1")
    response = await gateway.client.post(TRANSCRIBE, data=transcription_form(bytes(32_000), model="gpt-4o-transcribe"),
                                         headers=auth(org["api_key"]))
    usage = decimal_json(await response.read())["usage"]
    assert (usage["input_tokens"], usage["output_tokens"]) == (20, 4)  # 2 s of audio, 4 words
    assert usage["cost"] == 20 * Decimal("0.0000025") + 4 * Decimal("0.00001")
    (event,) = await request_events(gateway)
    assert (event.prompt_tokens, event.completion_tokens) == (20, 4)


async def test_sdk_text_format_returns_plain_text(client):
    text = await client.audio.transcriptions.create(model="whisper-1", response_format="text",
                                                    file=("a.mp3", io.BytesIO(silent_mp3(2)), "audio/mpeg"))
    assert text == completion_text(4).strip() + "\n"


async def test_an_orgs_own_openai_key_pays_for_its_media_requests(make_gateway, config, simulator):
    master, own_key = "test-master-key-0123456789", "sk-org-own-openai-key-abcdefghijklmnop"
    gateway = await make_gateway(msgspec.structs.replace(
        config, secrets=msgspec.structs.replace(config.secrets, master_key=master)))
    org = await gateway.new_org("0")  # no credit: only its own key lets these requests through
    await admin.set_provider_key(gateway.ledger.recorder, Sealer(master), org["org_id"], "openai", own_key)
    await gateway.ledger.follower.catch_up()
    headers = auth(org["api_key"])
    for path, kwargs in [("/v1/embeddings", {"json": {"model": "text-embedding-3-small", "input": "x"}}),
                         (SPEECH, {"json": speech_body()}), (TRANSCRIBE, {"data": transcription_form(silent_mp3(1))})]:
        response = await gateway.client.post(path, headers=headers, **kwargs)
        assert response.status == 200, await response.text()
        await response.read()
    assert {r["headers"]["authorization"] for r in await upstream_requests(gateway, simulator)} == {
        f"Bearer {own_key}"}
    events = await request_events(gateway)
    assert len(events) == 3 and all(e.cost_inr_nano > 0 and e.charged_inr_nano == 0 for e in events)


async def test_upstream_silence_after_the_upload_is_504(make_gateway, config):
    openai_config = msgspec.structs.replace(config.providers["openai"], timeout_s=0.3)
    gateway = await make_gateway(msgspec.structs.replace(
        config, providers={**config.providers, "openai": openai_config}))
    org = await gateway.new_org("10")
    response = await gateway.client.post(TRANSCRIBE, data=transcription_form(silent_mp3(1), prompt="[sim:hang]"),
                                         headers=auth(org["api_key"]))
    assert response.status == 504
    assert (await response.json())["error"]["type"] == "gateway_error"
    assert await gateway.balance(org["org_id"]) == Decimal(10)
