"""The simulator as a hostile provider: its faults, in each wire format (`simulator.hostile`)."""

from typing import Any

import orjson
import pytest

from simulator.hostile import FAULTY_COUNTS, NOT_JSON, spoiled_usage
from simulator.mp3 import silent_mp3
from tests.support import transcription_form

OPENAI = {"Authorization": "Bearer sk-test"}
ANTHROPIC = {"x-api-key": "sk-ant-test", "anthropic-version": "2023-06-01"}
GEMINI = {"x-goog-api-key": "goog-test"}


def openai_chat(text: str, **extra: Any) -> dict[str, Any]:
    return {"model": "sim-model", "messages": [{"role": "user", "content": text}], **extra}


def gemini_chat(text: str) -> dict[str, Any]:
    return {"contents": [{"role": "user", "parts": [{"text": text}]}]}


async def frames(response) -> list[bytes]:
    return [frame for frame in (await response.read()).replace(b"\r\n", b"\n").split(b"\n\n") if frame]


@pytest.mark.parametrize("fault", ["negative", "string", "huge", "float", "bool"])
def test_each_usage_fault_replaces_the_prompt_count(fault):
    usage = spoiled_usage({"prompt_tokens": 7, "completion_tokens": 2}, fault, "prompt_tokens")
    assert usage == {"prompt_tokens": FAULTY_COUNTS[fault], "completion_tokens": 2}


def test_cached_over_reports_more_cached_than_prompt_tokens_where_a_cache_is_reported():
    path = ("prompt_tokens_details", "cached_tokens")
    assert spoiled_usage({"prompt_tokens": 7}, "cached_over", "prompt_tokens", path) == {
        "prompt_tokens": 7, "prompt_tokens_details": {"cached_tokens": 17}}
    assert spoiled_usage({"prompt_tokens": 7}, "cached_over", "prompt_tokens") == {"prompt_tokens": 7}


async def test_openai_chat_faults(make_client):
    client = await make_client()
    body = await (await client.post("/v1/chat/completions", headers=OPENAI,
                                    json=openai_chat("hi [sim:usage=negative]"))).json()
    assert body["usage"]["prompt_tokens"] == -50_000_000
    body = await (await client.post("/v1/chat/completions", headers=OPENAI,
                                    json=openai_chat("hi [sim:malformed]"))).json()
    assert body["choices"] == "malformed"
    stream = openai_chat("hi [sim:tokens=2] [sim:bad_chunk] [sim:no_end]", stream=True)
    sent = await frames(await client.post("/v1/chat/completions", headers=OPENAI, json=stream))
    assert sent[3] + b"\n\n" == NOT_JSON  # role, two tokens, then the broken chunk
    assert b"[DONE]" not in sent[-1] and b"finish_reason\":\"stop" in sent[-1]


async def test_a_fault_value_no_route_knows_is_refused(make_client):
    client = await make_client()
    response = await client.post("/v1/chat/completions", headers=OPENAI, json=openai_chat("[sim:usage=weird]"))
    assert response.status == 400


async def test_anthropic_faults(make_client):
    client = await make_client()
    body = {"model": "claude-haiku-4-5", "max_tokens": 5, "messages": [
        {"role": "user", "content": "hi [sim:malformed] [sim:usage=cached_over]"}]}
    answer = await (await client.post("/v1/messages", headers=ANTHROPIC, json=body)).json()
    assert answer["content"] == "malformed"
    assert answer["usage"]["input_tokens"] == -10 and answer["usage"]["cache_read_input_tokens"] > 10
    sent = await frames(await client.post("/v1/messages", headers=ANTHROPIC, json={**body, "stream": True}))
    names = [frame.split(b"\n", 1)[0] for frame in sent]
    assert names[-3:] == [b"event: content_block_delta", b"event: message_delta", b"event: message_stop"]
    assert orjson.loads(sent[-3].split(b"data: ", 1)[1])["delta"] == "malformed"  # before the closing delta
    no_end = {**body, "stream": True, "messages": [{"role": "user", "content": "hi [sim:no_end]"}]}
    sent = await frames(await client.post("/v1/messages", headers=ANTHROPIC, json=no_end))
    assert sent[-1].startswith(b"event: message_delta")


async def test_gemini_faults(make_client):
    client = await make_client()
    route = "/v1beta/models/gemini-2.5-flash:"
    answer = await (await client.post(route + "generateContent", headers=GEMINI,
                                      json=gemini_chat("hi [sim:usage=string]"))).json()
    assert answer["usageMetadata"]["promptTokenCount"] == "12"
    sent = await frames(await client.post(route + "streamGenerateContent?alt=sse", headers=GEMINI,
                                          json=gemini_chat("hi [sim:tokens=2] [sim:no_end] [sim:bad_chunk]")))
    assert sent[2] + b"\n\n" == NOT_JSON
    events = [orjson.loads(frame.removeprefix(b"data: ")) for frame in sent if frame + b"\n\n" != NOT_JSON]
    assert all("finishReason" not in c for event in events for c in event["candidates"])


async def test_embeddings_faults(make_client):
    client = await make_client()
    body = {"model": "text-embedding-3-small", "input": "one two [sim:usage=huge] [sim:malformed]"}
    answer = await (await client.post("/v1/embeddings", headers=OPENAI, json=body)).json()
    assert answer["usage"]["prompt_tokens"] == 10**15 and answer["data"] == "malformed"


@pytest.mark.parametrize(("path", "directive"), [
    ("/v1/embeddings", "[sim:bad_chunk]"), ("/v1/embeddings", "[sim:no_end]"), ("/v1/embeddings", "[sim:hang_after=1]"),
    ("/v1/audio/speech", "[sim:usage=huge]"), ("/v1/audio/speech", "[sim:malformed]"),
    ("/v1/audio/transcriptions", "[sim:bad_chunk]")])
async def test_a_media_route_refuses_a_directive_it_would_ignore(make_client, path, directive):
    client = await make_client()
    if path == "/v1/audio/transcriptions":
        request = {"data": transcription_form(silent_mp3(1), prompt=directive)}
    elif path == "/v1/audio/speech":
        request = {"json": {"model": "tts-1", "input": f"hi {directive}", "voice": "alloy"}}
    else:
        request = {"json": {"model": "text-embedding-3-small", "input": f"one {directive}"}}
    response = await client.post(path, headers=OPENAI, **request)
    assert response.status == 400
    assert "invalid simulator directive" in (await response.json())["error"]["message"]
