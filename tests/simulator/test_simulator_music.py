"""The upstream simulator's Gemini `generateContent` route for music models, over real sockets."""

import asyncio
import base64
import time
from typing import Any

import aiohttp
import orjson
import pytest

from simulator.mp3 import (
    BITRATE,
    CYCLE_BYTES,
    CYCLE_FRAMES,
    SAMPLE_RATE,
    audio_start,
    iter_frame_headers,
    mp3_duration_s,
    silent_mp3,
)
from tests.support import sim_records, wait_for_outcome

CLIP, PRO = "tune-3-clip-preview", "tune-3-pro-preview"
KEY = {"x-goog-api-key": "goog-test"}
PROMPT = "calm lo-fi beat with soft piano"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(64)
JPEG = b"\xff\xd8\xff\xe0" + bytes(64)
NOT_BASE64 = {"inlineData": {"mimeType": "image/png", "data": "not base64!"}}

# The song text of PROMPT on the clip model, by the rules of simulator.lyrics.
CLIP_TEXT = (
    "<intro>\n\n"
    "<verse>\ncalm lo-fi beat with\nsoft piano calm lo-fi\n\n"
    "<chorus>\noh calm lo-fi beat\noh calm lo-fi beat\n\n"
    "<outro>"
)
SAFETY_RATINGS = [
    {"category": "HARM_CATEGORY_HATE_SPEECH", "probability": "NEGLIGIBLE"},
    {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH", "blocked": True},
    {"category": "HARM_CATEGORY_HARASSMENT", "probability": "NEGLIGIBLE"},
    {"category": "HARM_CATEGORY_SEXUALLY_EXPLICIT", "probability": "NEGLIGIBLE"},
]


def path(model: str = CLIP, action: str = "generateContent") -> str:
    return f"/v1beta/models/{model}:{action}"


def image(mime_type: str, data: bytes) -> dict[str, Any]:
    return {"inlineData": {"mimeType": mime_type, "data": base64.b64encode(data).decode()}}


def music(prompt: str = PROMPT, *images: dict[str, Any]) -> dict[str, Any]:
    """A request body as the gateway sends it: the prompt, then any images, in one user turn."""
    return {
        "contents": [{"role": "user", "parts": [{"text": prompt}, *images]}],
        "generationConfig": {"responseModalities": ["AUDIO", "TEXT"]},
    }


async def generate(client, prompt: str = PROMPT, model: str = CLIP, **kwargs: Any):
    return await client.post(path(model), json=music(prompt), headers=KEY, **kwargs)


def audio_of(body: dict[str, Any]) -> bytes:
    (part,) = [p for p in body["candidates"][0]["content"]["parts"] if "inlineData" in p]
    assert part["inlineData"]["mimeType"] == "audio/mpeg"
    return base64.b64decode(part["inlineData"]["data"], validate=True)


# --- MP3 bytes ------------------------------------------------------------------------------


def check_frame_header(header: bytes, padded: bool) -> None:
    """Decode the header bit by bit, independently of simulator.mp3."""
    word = int.from_bytes(header, "big")
    assert word >> 21 == 0x7FF  # sync
    assert (word >> 19) & 0b11 == 0b11  # MPEG-1
    assert (word >> 17) & 0b11 == 0b01  # Layer III
    assert (word >> 16) & 1 == 1  # no CRC
    assert (word >> 12) & 0xF == 5  # 64 kbps
    assert (word >> 10) & 0b11 == 0  # 44.1 kHz
    assert (word >> 9) & 1 == padded


def test_silent_stream_is_well_formed_mp3():
    data = silent_mp3(30, {"model": CLIP, "prompt_sha256": "ab" * 32})
    assert data[:3] == b"ID3" and b"TXXX" in data[:200] and CLIP.encode() in data[:200]
    start = audio_start(data)
    frames, position, padded_count = 0, start, 0
    while position < len(data):
        padded = bool(data[position + 2] & 0x02)
        check_frame_header(data[position : position + 4], padded)
        assert set(data[position + 4 : position + 208 + padded]) == {0}  # silence
        position, frames, padded_count = position + 208 + padded, frames + 1, padded_count + padded
    assert position == len(data)
    assert frames == 1148 and len(data) - start == 239_908
    # exact average bitrate: bytes * 8 / seconds
    seconds = frames * 1152 / SAMPLE_RATE
    assert (len(data) - start) * 8 / seconds == pytest.approx(BITRATE, rel=1e-4)
    assert CYCLE_FRAMES == 49 and CYCLE_BYTES == 49 * 144 * BITRATE // SAMPLE_RATE == 10240
    assert mp3_duration_s(data) == pytest.approx(1148 * 1152 / 44_100)
    assert mp3_duration_s(data[start:]) == mp3_duration_s(data)  # no tag: same audio


def test_frame_walker_rejects_what_is_not_mp3():
    data = silent_mp3(1)
    for bad in (b"", b"ID3\x04\x00\x00\x00\x00\x00\x00", data[:-1], data + b"\x00" * 8, PNG):
        with pytest.raises(ValueError, match=r"MPEG|frame|bitrate"):
            mp3_duration_s(bad)
    headers = list(iter_frame_headers(data))
    assert {(h.version, h.bitrate, h.sample_rate, h.channels) for h in headers} == {
        ("MPEG-1", 64_000, 44_100, 1)
    }


def test_long_streams_build_in_milliseconds():
    started = time.perf_counter()
    data = silent_mp3(150, {"model": PRO})
    assert time.perf_counter() - started < 0.1
    assert mp3_duration_s(data) == pytest.approx(149.995, abs=0.01)


# --- successful answers ---------------------------------------------------------------------


async def test_clip_answer_has_the_exact_shape(make_client):
    client = await make_client()
    response = await generate(client)
    assert response.status == 200 and response.content_type == "application/json"
    body = await response.json()
    audio = audio_of(body)
    encoded = base64.b64encode(audio).decode()
    assert body == {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [
                        {"text": CLIP_TEXT},
                        {"inlineData": {"mimeType": "audio/mpeg", "data": encoded}},
                    ],
                },
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        # prompt: 6 words + 4 per content; candidates: 20 words of text + 32 per second of audio
        "usageMetadata": {
            "promptTokenCount": 10, "candidatesTokenCount": 980, "totalTokenCount": 990
        },
        "modelVersion": CLIP,
    }
    assert mp3_duration_s(audio) == pytest.approx(30, abs=0.1)
    check_frame_header(audio[audio_start(audio) :][:4], padded=False)
    assert len(audio) - audio_start(audio) == 239_908


async def test_pro_answer_is_a_longer_song(make_client):
    client = await make_client()
    body = await (await generate(client, model=PRO)).json()
    assert body["modelVersion"] == PRO and body["candidates"][0]["finishReason"] == "STOP"
    audio = audio_of(body)
    assert 120 <= mp3_duration_s(audio) <= 180
    assert len(audio) - audio_start(audio) == 1_199_960
    text = body["candidates"][0]["content"]["parts"][0]["text"]
    markers = [line for line in text.splitlines() if line.startswith("<")]
    sections = ["intro", "verse", "chorus", "verse", "chorus", "bridge", "chorus", "outro"]
    assert markers == [f"<{name}>" for name in sections]
    usage = body["usageMetadata"]
    assert usage["candidatesTokenCount"] == len(text.split()) + 32 * 150
    assert usage["totalTokenCount"] == usage["promptTokenCount"] + usage["candidatesTokenCount"]


async def test_instrumental_prompt_has_structure_but_no_sung_lines(make_client):
    client = await make_client()
    body = await (await generate(client, "waves\n\nInstrumental only, no vocals.")).json()
    text = body["candidates"][0]["content"]["parts"][0]["text"]
    assert text == "<intro>\n\n<verse>\n\n<chorus>\n\n<outro>"
    assert mp3_duration_s(audio_of(body)) == pytest.approx(30, abs=0.1)


async def test_lyrics_prompt_is_sung_within_the_structure(make_client):
    client = await make_client()
    body = await (await generate(client, "waves\n\nLyrics:\n[Verse] hello\nsea of light")).json()
    text = body["candidates"][0]["content"]["parts"][0]["text"]
    assert text == "<intro>\n\n<verse>\n[Verse] hello\nsea of light\n\n<outro>"


async def test_reference_images_are_accepted_counted_and_recorded(make_client):
    client = await make_client()
    sent = music("epic orchestral", image("image/png", PNG), image("image/jpeg", JPEG))
    response = await client.post(path(PRO), json=sent, headers=KEY)
    assert response.status == 200
    body = await response.json()
    assert body["usageMetadata"]["promptTokenCount"] == 2 + 4 + 2 * 258
    [record] = await sim_records(client)
    assert record["path"] == path(PRO) and record["method"] == "POST"
    assert record["body"] == sent and record["outcome"] == "completed"
    assert record["headers"]["x-goog-api-key"] == "goog-test"
    parts = record["body"]["contents"][0]["parts"]
    assert base64.b64decode(parts[1]["inlineData"]["data"]) == PNG


async def test_same_prompt_same_bytes_different_prompt_different_bytes(make_client):
    client = await make_client()
    prompts = (PROMPT, PROMPT, "rain")
    first, again, other = [await (await generate(client, p)).json() for p in prompts]
    assert first == again
    assert audio_of(first) != audio_of(other)
    assert mp3_duration_s(audio_of(first)) == mp3_duration_s(audio_of(other))
    with_image = await client.post(path(), json=music(PROMPT, image("image/png", PNG)), headers=KEY)
    assert audio_of(await with_image.json()) != audio_of(first)


# --- directives -----------------------------------------------------------------------------


async def test_block_prompt_answers_200_with_prompt_feedback_only(make_client):
    client = await make_client()
    response = await generate(client, "bad idea [sim:block=prompt]")
    assert response.status == 200
    assert await response.json() == {
        "promptFeedback": {"blockReason": "SAFETY", "safetyRatings": SAFETY_RATINGS},
        "usageMetadata": {"promptTokenCount": 7, "totalTokenCount": 7},
        "modelVersion": CLIP,
    }
    [record] = await sim_records(client)
    assert record["outcome"] == "completed"


async def test_block_candidate_answers_a_safety_stop_without_audio(make_client):
    client = await make_client()
    response = await generate(client, "bad idea [sim:block=candidate]", model=PRO)
    assert response.status == 200
    assert await response.json() == {
        "candidates": [{"finishReason": "SAFETY", "index": 0, "safetyRatings": SAFETY_RATINGS}],
        "usageMetadata": {"promptTokenCount": 7, "totalTokenCount": 7},
        "modelVersion": PRO,
    }


async def test_block_400_is_an_invalid_argument_saying_blocked(make_client):
    client = await make_client()
    response = await generate(client, "bad idea [sim:block=400]")
    assert response.status == 400
    assert await response.json() == {
        "error": {
            "code": 400,
            "message": "The prompt was blocked due to safety reasons.",
            "status": "INVALID_ARGUMENT",
        }
    }
    [record] = await sim_records(client)
    assert record["outcome"] == "error"


async def test_no_audio_answers_only_the_text_part(make_client):
    client = await make_client()
    body = await (await generate(client, f"{PROMPT} [sim:no_audio]")).json()
    [candidate] = body["candidates"]
    assert candidate["finishReason"] == "STOP"
    assert candidate["content"] == {"role": "model", "parts": [{"text": CLIP_TEXT}]}
    usage = {"promptTokenCount": 11, "candidatesTokenCount": 20, "totalTokenCount": 31}
    assert body["usageMetadata"] == usage


@pytest.mark.parametrize(
    ("status", "rpc_status"),
    [
        (429, "RESOURCE_EXHAUSTED"),
        (500, "INTERNAL"),
        (503, "UNAVAILABLE"),
        (400, "INVALID_ARGUMENT"),
    ],
)
async def test_status_directive_gives_gemini_errors(make_client, status, rpc_status):
    client = await make_client()
    response = await generate(client, f"x [sim:status={status}]")
    assert response.status == status and response.content_type == "application/json"
    assert (response.headers.get("Retry-After") == "1") is (status == 429)
    assert await response.json() == {
        "error": {"code": status, "message": f"simulated error {status}", "status": rpc_status}
    }
    [record] = await sim_records(client)
    assert record["outcome"] == "error"


async def test_latency_directive_delays_the_answer(make_client):
    client = await make_client()
    started = time.monotonic()
    response = await generate(client, "x [sim:latency_ms=200]")
    assert response.status == 200
    assert time.monotonic() - started >= 0.19


async def test_hang_never_answers(make_client, handler_cancellation):
    client = await make_client(handler_cancellation=handler_cancellation)
    started = time.monotonic()
    with pytest.raises(asyncio.TimeoutError):
        await generate(client, "x [sim:hang]", timeout=aiohttp.ClientTimeout(total=0.3))
    assert time.monotonic() - started >= 0.29
    await wait_for_outcome(client, 1, "disconnected")


@pytest.mark.parametrize("value", ["0", "3"])
async def test_drop_after_aborts_without_a_response(make_client, handler_cancellation, value):
    client = await make_client(handler_cancellation=handler_cancellation)
    with pytest.raises(aiohttp.ServerDisconnectedError):
        await generate(client, f"x [sim:drop_after={value}]")
    await wait_for_outcome(client, 1, "dropped")
    assert (await generate(client)).status == 200  # the simulator is fine afterwards


# --- auth, routing and validation -----------------------------------------------------------


async def test_api_key_by_header_or_query(make_client):
    client = await make_client()
    assert (await client.post(path(), json=music(), headers=KEY)).status == 200
    response = await client.post(path() + "?key=goog-test", json=music())
    assert response.status == 200
    [_, record] = await sim_records(client)
    assert record["query"] == {"key": "goog-test"}


@pytest.mark.parametrize(
    ("headers", "query"),
    [({}, ""), ({"x-goog-api-key": ""}, ""), ({"x-goog-api-key": "  "}, "?key="),
     ({"Authorization": "Bearer sk-test"}, "")],
)  # fmt: skip
async def test_missing_key_gets_401_unauthenticated(make_client, headers, query):
    client = await make_client()
    response = await client.post(path() + query, json=music(), headers=headers)
    assert response.status == 401
    error = (await response.json())["error"]
    assert error["code"] == 401 and error["status"] == "UNAUTHENTICATED" and error["message"]
    [record] = await sim_records(client)
    assert record["outcome"] == "error" and record["body"] == music()


@pytest.mark.parametrize(
    "route", [path("gemini-2.0-flash"), path("tune-3"), path(CLIP, "streamGenerateContent"),
              f"/v1beta/models/{CLIP}"],
)  # fmt: skip
async def test_unknown_model_or_action_gets_404_not_found(make_client, route):
    client = await make_client()
    response = await client.post(route, json=music(), headers=KEY)
    assert response.status == 404
    error = (await response.json())["error"]
    assert error["code"] == 404 and error["status"] == "NOT_FOUND" and "models/" in error["message"]
    [record] = await sim_records(client)
    assert record["path"] == route and record["outcome"] == "error"


@pytest.mark.parametrize(
    "raw",
    [
        b"{not json",
        b"",
        orjson.dumps({}),
        orjson.dumps({"contents": []}),
        orjson.dumps({"contents": "hello"}),
        orjson.dumps({"contents": [{"role": "user", "parts": []}]}),
        orjson.dumps({"contents": [{"role": "user"}]}),
        orjson.dumps({"contents": [{"role": "user", "parts": [{}]}]}),
        orjson.dumps(music(PROMPT, {"inlineData": {"data": base64.b64encode(PNG).decode()}})),
        orjson.dumps(music(PROMPT, {"inlineData": {"mimeType": "image/png", "data": ""}})),
        orjson.dumps(music(PROMPT, image("image/png", PNG), NOT_BASE64)),
        orjson.dumps(music("[sim:tokens=3]")),  # a chat directive: unknown on this route
        orjson.dumps(music("[sim:block=maybe]")),
        orjson.dumps(music("[sim:no_audio=please]")),
    ],
)
async def test_bad_requests_get_400_invalid_argument(make_client, raw):
    client = await make_client()
    headers = {**KEY, "Content-Type": "application/json"}
    response = await client.post(path(), data=raw, headers=headers)
    assert response.status == 400
    error = (await response.json())["error"]
    assert error["code"] == 400 and error["status"] == "INVALID_ARGUMENT" and error["message"]


async def test_openai_route_is_unchanged_beside_gemini(make_client):
    client = await make_client(completion_tokens=2)
    chat = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    response = await client.post("/v1/chat/completions", json=chat, headers=KEY)
    assert response.status == 401  # a Gemini key is not an OpenAI credential
    response = await client.post(
        "/v1/chat/completions", json=chat, headers={"Authorization": "Bearer sk-test"}
    )
    assert (await response.json())["choices"][0]["message"]["content"] == "the quick "
    assert [r["path"] for r in await sim_records(client)] == ["/v1/chat/completions"] * 2
