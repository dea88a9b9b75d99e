"""The upstream simulator's Gemini chat routes (generateContent, streamGenerateContent), over
real sockets."""

import asyncio
import base64
import re
from typing import Any

import aiohttp
import orjson
import pytest

from simulator.textgen import completion_text, iter_tokens
from tests.support import sim_records

FLASH = "gemini-2.5-flash"
KEY = {"x-goog-api-key": "goog-test"}
PNG = b"\x89PNG\r\n\x1a\n" + bytes(16)
WEATHER = {"name": "get_weather", "description": "Weather of a city",
           "parametersJsonSchema": {"type": "object", "properties": {
               "city": {"type": "string"}, "days": {"type": "integer"}, "metric": {"type": "boolean"}}}}


def path(action: str = "generateContent", model: str = FLASH) -> str:
    return f"/v1beta/models/{model}:{action}"


STREAM = path("streamGenerateContent") + "?alt=sse"


def chat(text: str = "hello there", system: str | None = None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"contents": [{"role": "user", "parts": [{"text": text}]}], **extra}
    if system is not None:
        body["systemInstruction"] = {"parts": [{"text": system}]}
    return body


async def post(client, body: dict[str, Any], route: str | None = None, **kwargs: Any):
    return await client.post(route or path(), json=body, headers=KEY, **kwargs)


async def sse_events(response) -> list[dict[str, Any]]:
    raw = await response.read()
    frames = raw.split(b"\r\n\r\n")
    assert frames[-1] == b""  # every event ends with a blank line (CRLF framing)
    assert all(frame.startswith(b"data: ") for frame in frames[:-1])
    return [orjson.loads(frame[6:]) for frame in frames[:-1]]


async def wait_for_outcome(client, outcome: str, timeout: float = 30.0) -> None:  # generous: a loaded machine
    deadline = asyncio.get_running_loop().time() + timeout
    while (await sim_records(client))[-1]["outcome"] != outcome:
        assert asyncio.get_running_loop().time() < deadline, await sim_records(client)
        await asyncio.sleep(0.02)


def text_of(body: dict[str, Any], index: int = 0) -> str:
    return "".join(p.get("text", "") for p in body["candidates"][index]["content"]["parts"])


# --- JSON answers -----------------------------------------------------------------------------


async def test_json_answer_has_the_exact_shape(make_client):
    client = await make_client()
    response = await post(client, chat("hello there", system="Be brief."))
    assert response.status == 200 and response.content_type == "application/json"
    body = await response.json()
    assert re.fullmatch(r"sim[0-9a-f]{20}", body.pop("responseId"))
    assert body == {
        "candidates": [{
            "content": {"role": "model", "parts": [{"text": completion_text(16)}]},
            "finishReason": "STOP", "index": 0}],
        # prompt: (2 words + 4) for the system instruction + (2 words + 4) for the user turn
        "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 16, "totalTokenCount": 28},
        "modelVersion": FLASH,
    }


async def test_max_output_tokens_cuts_the_text_with_max_tokens(make_client):
    client = await make_client()
    body = await (await post(client, chat("hi", generationConfig={"maxOutputTokens": 3}))).json()
    assert text_of(body) == completion_text(3)
    assert body["candidates"][0]["finishReason"] == "MAX_TOKENS"
    assert body["usageMetadata"]["candidatesTokenCount"] == 3


async def test_candidate_count_gives_that_many_candidates(make_client):
    client = await make_client()
    body = await (await post(client, chat("hi [sim:tokens=2]", generationConfig={"candidateCount": 2}))).json()
    assert [c["index"] for c in body["candidates"]] == [0, 1]
    assert text_of(body, 0) == text_of(body, 1) == completion_text(2)
    assert body["usageMetadata"]["candidatesTokenCount"] == 4


async def test_prompt_tokens_count_turns_images_and_function_parts(make_client):
    client = await make_client()
    image = {"inlineData": {"mimeType": "image/png", "data": base64.b64encode(PNG).decode()}}
    call = {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}}
    result = {"functionResponse": {"name": "get_weather", "response": {"content": "sunny and warm"}}}
    body = {"contents": [{"role": "user", "parts": [{"text": "look at this"}, image]},
                         {"role": "model", "parts": [call]},
                         {"role": "user", "parts": [result]}]}
    usage = (await (await post(client, body)).json())["usageMetadata"]
    # 3 words + 4, an image 258; the call: its name and {"city":"Paris"}, 2 pieces of 1 word,
    # + 4; the response: its name and {"content":"sunny and warm"}: 1 + 3 words, + 4.
    assert usage["promptTokenCount"] == 7 + 258 + 6 + 8


async def test_cached_and_thought_tokens_are_reported(make_client):
    client = await make_client()
    body = await (await post(client, chat("a b [sim:tokens=2] [sim:cached=3] [sim:thoughts=5]"))).json()
    assert body["usageMetadata"] == {"promptTokenCount": 9, "candidatesTokenCount": 2, "totalTokenCount": 16,
                                     "cachedContentTokenCount": 3, "thoughtsTokenCount": 5}


@pytest.mark.parametrize("reason", ["SAFETY", "RECITATION", "OTHER"])
async def test_finish_directive_sets_the_finish_reason(make_client, reason):
    client = await make_client()
    body = await (await post(client, chat(f"x [sim:tokens=1] [sim:finish={reason}]"))).json()
    assert body["candidates"][0]["finishReason"] == reason


# --- function calls ---------------------------------------------------------------------------


async def test_tool_directive_calls_the_declared_function_after_the_text(make_client):
    client = await make_client()
    body = await (await post(client, chat("weather? [sim:tokens=2] [sim:tool=get_weather]",
                                          tools=[{"functionDeclarations": [WEATHER]}]))).json()
    candidate = body["candidates"][0]
    assert candidate["content"]["parts"] == [
        {"text": completion_text(2)},
        {"functionCall": {"name": "get_weather",
                          "args": {"city": "the quick brown fox", "days": 7, "metric": True}}}]
    assert candidate["finishReason"] == "STOP"
    assert body["usageMetadata"]["candidatesTokenCount"] == 2 + 8


async def test_mode_any_forces_the_first_allowed_function(make_client):
    client = await make_client()
    other = {"name": "other", "parameters": {"type": "OBJECT", "properties": {"n": {"type": "NUMBER"}}}}
    config = {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["other"]}}
    body = await (await post(client, chat("x [sim:tokens=0]", tools=[{"functionDeclarations": [WEATHER, other]}],
                                          toolConfig=config))).json()
    assert body["candidates"][0]["content"]["parts"] == [{"functionCall": {"name": "other", "args": {"n": 7}}}]


async def test_tool_directive_naming_an_undeclared_function_is_400(make_client):
    client = await make_client()
    response = await post(client, chat("x [sim:tool=nope]", tools=[{"functionDeclarations": [WEATHER]}]))
    assert response.status == 400
    assert "nope" in (await response.json())["error"]["message"]


# --- streaming --------------------------------------------------------------------------------


async def test_stream_sends_an_event_per_token_then_the_finish(make_client):
    client = await make_client()
    response = await post(client, chat("hi [sim:tokens=3]", system="Be brief."), STREAM)
    assert response.status == 200 and response.headers["Content-Type"] == "text/event-stream"
    events = await sse_events(response)
    assert len({e.pop("responseId") for e in events}) == 1
    prompt = 6 + 6
    expected = [{"candidates": [{"content": {"role": "model", "parts": [{"text": token}]}, "index": 0}],
                 "usageMetadata": {"promptTokenCount": prompt, "candidatesTokenCount": sent,
                                   "totalTokenCount": prompt + sent},
                 "modelVersion": FLASH}
                for sent, token in enumerate(iter_tokens(3), 1)]
    expected.append({"candidates": [{"content": {"role": "model", "parts": [{"text": ""}]},
                                     "finishReason": "STOP", "index": 0}],
                     "usageMetadata": {"promptTokenCount": prompt, "candidatesTokenCount": 3,
                                       "totalTokenCount": prompt + 3},
                     "modelVersion": FLASH})
    assert events == expected
    [record] = await sim_records(client)
    assert record["outcome"] == "completed" and record["query"] == {"alt": "sse"}


async def test_stream_sends_the_function_call_before_the_finish(make_client):
    client = await make_client()
    body = chat("x [sim:tokens=1] [sim:tool=get_weather]", tools=[{"functionDeclarations": [WEATHER]}])
    events = await sse_events(await post(client, body, STREAM))
    assert len(events) == 3
    assert "functionCall" in events[1]["candidates"][0]["content"]["parts"][0]
    assert events[2]["candidates"][0]["finishReason"] == "STOP"
    assert events[2]["usageMetadata"]["candidatesTokenCount"] == 9


async def test_stream_without_alt_sse_is_one_json_array_of_the_events(make_client):
    client = await make_client()
    response = await post(client, chat("hi [sim:tokens=2]"), path("streamGenerateContent"))
    assert response.content_type == "application/json"
    events = await response.json()
    assert [text_of(e) for e in events] == [*iter_tokens(2), ""]
    assert events[-1]["candidates"][0]["finishReason"] == "STOP"


async def test_stream_drop_after_aborts_after_k_token_events(make_client, handler_cancellation):
    client = await make_client(handler_cancellation=handler_cancellation)
    response = await post(client, chat("x [sim:drop_after=2]"), STREAM)
    received = b""
    with pytest.raises(aiohttp.ClientPayloadError):
        async for data in response.content.iter_any():
            received += data
    assert received.count(b"data: ") == 2 and b"finishReason" not in received
    await wait_for_outcome(client, "dropped")


async def test_stream_hang_after_goes_silent_after_k_token_events(make_client, handler_cancellation):
    client = await make_client(handler_cancellation=handler_cancellation)
    response = await post(client, chat("x [sim:hang_after=1]"), STREAM)
    received = b""
    while b"\r\n\r\n" not in received:
        received += await asyncio.wait_for(response.content.readany(), 3)
    assert received.count(b"data: ") == 1
    response.close()
    await wait_for_outcome(client, "disconnected")


# --- refusals and errors ----------------------------------------------------------------------


async def test_block_prompt_answers_prompt_feedback_without_candidates(make_client):
    client = await make_client()
    for route in (path(), STREAM):
        response = await post(client, chat("x [sim:block=prompt]"), route)
        [body] = await sse_events(response) if route == STREAM else [await response.json()]
        assert "candidates" not in body and body["promptFeedback"]["blockReason"] == "SAFETY"
        assert body["usageMetadata"] == {"promptTokenCount": 6, "totalTokenCount": 6}


async def test_block_candidate_answers_a_candidate_stopped_for_safety(make_client):
    client = await make_client()
    body = await (await post(client, chat("x [sim:block=candidate]"))).json()
    [candidate] = body["candidates"]
    assert candidate["finishReason"] == "SAFETY" and "content" not in candidate


async def test_block_400_is_invalid_argument_saying_blocked(make_client):
    client = await make_client()
    for route in (path(), STREAM):
        response = await post(client, chat("x [sim:block=400]"), route)
        assert response.status == 400
        assert "blocked" in (await response.json())["error"]["message"]


@pytest.mark.parametrize(("status", "rpc"), [(429, "RESOURCE_EXHAUSTED"), (500, "INTERNAL"), (503, "UNAVAILABLE")])
async def test_status_directive_answers_a_gemini_error(make_client, status, rpc):
    client = await make_client()
    for route in (path(), STREAM):
        response = await post(client, chat(f"x [sim:status={status}]"), route)
        assert response.status == status
        assert (await response.json())["error"] == {"code": status, "message": f"simulated error {status}",
                                                    "status": rpc}
        assert (response.headers.get("Retry-After") == "1") == (status == 429)


@pytest.mark.parametrize("body", [
    {"contents": [{"role": "assistant", "parts": [{"text": "x"}]}]},
    {"contents": [{"role": "system", "parts": [{"text": "x"}]}]},
    chat("x", generationConfig={"max_tokens": 3}),
    chat("x", generationConfig={"maxOutputTokens": 0}),
    chat("x", generationConfig={"responseMimeType": "application/yaml"}),
    chat("x", messages=[]),
    {**chat("x"), "systemInstruction": {"parts": [{"inlineData": {"mimeType": "image/png", "data": "AAAA"}}]}},
    {"contents": [{"role": "user", "parts": [{"text": "x", "functionCall": {"name": "f"}}]}]},
    {"contents": [{"role": "user", "parts": [{"functionResponse": {"name": "f"}}]}]},
    chat("x", tools=[{"functionDeclarations": [{"name": "f", "parameters_schema": {}}]}]),
    chat("x [sim:no_audio]"),  # a music directive: unknown on this route
    chat("x [sim:block=maybe]"),
    chat("x [sim:tokens 3]"),
])  # fmt: skip
async def test_bad_requests_get_400_invalid_argument(make_client, body):
    client = await make_client()
    response = await post(client, body)
    assert response.status == 400
    error = (await response.json())["error"]
    assert error["code"] == 400 and error["status"] == "INVALID_ARGUMENT" and error["message"]


async def test_missing_key_gets_401(make_client):
    client = await make_client()
    response = await client.post(STREAM, json=chat())
    assert response.status == 401
    assert (await response.json())["error"]["status"] == "UNAUTHENTICATED"


@pytest.mark.parametrize("route", [path(model="gemini-2.0-flash"), path("countTokens"),
                                   path("streamGenerateContent", "tune-3-clip-preview")])
async def test_unknown_model_or_action_stays_404(make_client, route):
    client = await make_client()
    response = await post(client, chat(), route)
    assert response.status == 404
    assert (await response.json())["error"]["status"] == "NOT_FOUND"


async def test_music_route_still_answers_beside_chat(make_client):
    client = await make_client()
    music = {"contents": [{"role": "user", "parts": [{"text": "calm piano"}]}],
             "generationConfig": {"responseModalities": ["AUDIO", "TEXT"]}}
    body = await (await post(client, music, path(model="tune-3-clip-preview"))).json()
    parts = body["candidates"][0]["content"]["parts"]
    assert parts[1]["inlineData"]["mimeType"] == "audio/mpeg"
