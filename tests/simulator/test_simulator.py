"""The upstream simulator: OpenAI wire format, directives, recording and CLI."""

import asyncio
import signal
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from simulator.directives import DirectiveError, Directives, parse_directives
from simulator.textgen import WORDS, completion_text, count_prompt_tokens
from tests.support import sim_records, wait_for_outcome

PROJECT_ROOT = Path(__file__).resolve().parents[2]
AUTH = {"Authorization": "Bearer sk-test"}
PATH = "/v1/chat/completions"


def expected_text(n: int) -> str:
    """The completion text by the documented rule, computed independently of textgen."""
    return "".join(WORDS[i % len(WORDS)] + " " for i in range(n))


def chat(content: Any, **extra: Any) -> dict[str, Any]:
    return {"model": "sim-model", "messages": [{"role": "user", "content": content}], **extra}


async def post_chat(client, content: Any, **extra: Any) -> aiohttp.ClientResponse:
    """POST a one-message chat request with valid credentials."""
    return await client.post(PATH, json=chat(content, **extra), headers=AUTH)


ROLE_DELTA = {"role": "assistant", "content": ""}


async def sse_events(response: aiohttp.ClientResponse) -> list[Any]:
    """All ``data:`` payloads of a finished stream, decoded ("[DONE]" kept as a string)."""
    events: list[Any] = []
    async for line in response.content:
        events.append(decode_event(line))
    return [event for event in events if event is not None]


def decode_event(line: bytes) -> Any:
    text = line.decode().strip()
    if not text:
        return None
    assert text.startswith("data: ")
    payload = text.removeprefix("data: ")
    return payload if payload == "[DONE]" else orjson.loads(payload)


async def next_event(response: aiohttp.ClientResponse) -> Any:
    """The next non-blank SSE payload."""
    while True:
        event = decode_event(await response.content.readline())
        if event is not None:
            return event


# --- pure rules ---------------------------------------------------------------------------


def test_textgen_rules():
    assert 15 <= len(WORDS) <= 25 and all(w and " " not in w for w in WORDS)
    assert completion_text(0) == ""
    assert completion_text(len(WORDS) + 2) == expected_text(len(WORDS) + 2)
    assert completion_text(len(WORDS) + 2).endswith(f"{WORDS[0]} {WORDS[1]} ")
    assert count_prompt_tokens([["a b  c\n d"], [], ["x", "y z"]]) == 4 + 4 + 4 + 0 + 3 + 4


def test_directive_parsing():
    assert parse_directives(["no markers here"]) is parse_directives([])
    texts = ["hi [sim:status=429][sim:hang] x", "[sim:tps=2.5] [sim:tokens=3] [sim:tokens=5]"]
    assert parse_directives(texts) == Directives(status=429, hang=True, tps=2.5, tokens=5)
    bad_markers = ("[sim:tokens]", "[sim:tokens=]", "[sim:nope=1]", "[sim:status=200]", "[sim:x-y]")
    for bad in (*bad_markers, "[sim:drop_after=-1]"):
        with pytest.raises(DirectiveError):
            parse_directives([bad])


# --- JSON responses ---------------------------------------------------------------------


async def test_json_response_shape_and_deterministic_tokens(make_client):
    client = await make_client()
    body = {
        "model": "gpt-sim",
        "messages": [
            {"role": "system", "content": "You are terse."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "hello big world"},
                    {"type": "image_url", "image_url": {"url": "http://x/y.png"}},
                    {"type": "text", "text": "again"},
                ],
            },
        ],
        "temperature": 0.2,  # unknown to the simulator: ignored
        "user": "someone",
    }
    before = int(time.time())
    response = await client.post(PATH, json=body, headers=AUTH)
    assert response.status == 200
    assert response.content_type == "application/json"
    data = await response.json()
    assert data.pop("id").startswith("chatcmpl-sim-")
    assert before <= data.pop("created") <= int(time.time())
    assert data == {
        "object": "chat.completion",
        "model": "gpt-sim",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": expected_text(16)},
                "finish_reason": "stop",
            }
        ],
        "service_tier": "default",  # none asked for: the project's default
        # (3 words + 4) + (3 + 1 words + 4)
        "usage": {"prompt_tokens": 15, "completion_tokens": 16, "total_tokens": 31},
    }


async def test_completion_ids_differ(make_client):
    client = await make_client()
    ids = set()
    for _ in range(3):
        response = await client.post(PATH, json=chat("hi"), headers=AUTH)
        ids.add((await response.json())["id"])
    assert len(ids) == 3


async def test_tokens_setting_and_directive(make_client):
    client = await make_client(completion_tokens=3)
    data = await (await client.post(PATH, json=chat("hi"), headers=AUTH)).json()
    assert data["choices"][0]["message"]["content"] == expected_text(3) == "the quick brown "
    assert data["usage"]["completion_tokens"] == 3

    data = await (await client.post(PATH, json=chat("hi [sim:tokens=25]"), headers=AUTH)).json()
    assert data["choices"][0]["message"]["content"] == expected_text(25)
    # "hi" + the directive marker are 2 words, + 4 for the message
    assert data["usage"] == {"prompt_tokens": 6, "completion_tokens": 25, "total_tokens": 31}


@pytest.mark.parametrize(
    ("limits", "tokens", "finish_reason"),
    [
        ({"max_tokens": 4}, 4, "length"),
        ({"max_completion_tokens": 2}, 2, "length"),
        ({"max_tokens": 9, "max_completion_tokens": 5}, 5, "length"),
        ({"max_tokens": 10}, 10, "stop"),  # exactly enough: not truncated
        ({"max_tokens": 50}, 10, "stop"),
    ],
)
async def test_token_limit_truncates_with_length(make_client, limits, tokens, finish_reason):
    client = await make_client()
    data = await (await post_chat(client, "[sim:tokens=10]", **limits)).json()
    assert data["choices"][0]["finish_reason"] == finish_reason
    assert data["choices"][0]["message"]["content"] == expected_text(tokens)
    assert data["usage"]["completion_tokens"] == tokens


# --- streaming ------------------------------------------------------------------------------


async def test_stream_event_sequence_without_usage(make_client):
    client = await make_client(completion_tokens=3)
    response = await client.post(PATH, json=chat("hi", stream=True), headers=AUTH)
    assert response.status == 200
    assert response.headers["Content-Type"].startswith("text/event-stream")
    events = await sse_events(response)
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert len({c["id"] for c in chunks}) == 1 and chunks[0]["id"].startswith("chatcmpl-sim-")
    assert all(c["object"] == "chat.completion.chunk" and c["model"] == "sim-model" for c in chunks)
    assert all("usage" not in c and isinstance(c["created"], int) for c in chunks)
    assert [c["choices"] for c in chunks] == [
        [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}],
        [{"index": 0, "delta": {"content": "the "}, "finish_reason": None}],
        [{"index": 0, "delta": {"content": "quick "}, "finish_reason": None}],
        [{"index": 0, "delta": {"content": "brown "}, "finish_reason": None}],
        [{"index": 0, "delta": {}, "finish_reason": "stop"}],
    ]


async def test_stream_event_sequence_with_usage(make_client):
    client = await make_client()
    body = chat("one two [sim:tokens=2]", stream=True, stream_options={"include_usage": True})
    events = await sse_events(await client.post(PATH, json=body, headers=AUTH))
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert [(c["choices"], c["usage"]) for c in chunks] == [
        ([{"index": 0, "delta": ROLE_DELTA, "finish_reason": None}], None),
        ([{"index": 0, "delta": {"content": "the "}, "finish_reason": None}], None),
        ([{"index": 0, "delta": {"content": "quick "}, "finish_reason": None}], None),
        ([{"index": 0, "delta": {}, "finish_reason": "stop"}], None),
        ([], {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9}),
    ]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)


async def test_stream_include_usage_false_sends_no_usage(make_client):
    client = await make_client(completion_tokens=1)
    body = chat("hi", stream=True, stream_options={"include_usage": False})
    events = await sse_events(await client.post(PATH, json=body, headers=AUTH))
    assert len(events) == 4 and events[-1] == "[DONE]"
    assert all("usage" not in c for c in events[:-1])


async def test_stream_max_tokens_finishes_with_length(make_client):
    client = await make_client()
    body = chat("hi", stream=True, max_tokens=2, stream_options={"include_usage": True})
    events = await sse_events(await client.post(PATH, json=body, headers=AUTH))
    content = "".join(c["choices"][0]["delta"].get("content", "") for c in events[:-2])
    assert content == "the quick "
    assert events[-3]["choices"][0]["finish_reason"] == "length"
    assert events[-2]["usage"]["completion_tokens"] == 2


async def test_stream_tokens_are_paced(make_client):
    client = await make_client(tokens_per_second=1000)
    started = time.monotonic()
    body = chat("[sim:tokens=5] [sim:tps=40]", stream=True)
    response = await client.post(PATH, json=body, headers=AUTH)
    arrivals = []
    async for line in response.content:
        if line.strip():
            arrivals.append(time.monotonic())
    assert len(arrivals) == 1 + 5 + 1 + 1
    # 4 gaps of 1/40 s between the 5 token chunks; the directive overrides the setting
    assert arrivals[5] - arrivals[1] >= 4 / 40 * 0.9
    assert arrivals[-1] - started < 2


async def test_json_answer_takes_the_generation_time(make_client):
    client = await make_client()
    started = time.monotonic()
    response = await client.post(PATH, json=chat("[sim:tokens=5] [sim:tps=40]"), headers=AUTH)
    assert (await response.json())["usage"]["completion_tokens"] == 5
    assert time.monotonic() - started >= 4 / 40 * 0.9


# --- errors and auth -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "error_type"),
    [
        (429, "rate_limit_error"),
        (503, "server_error"),
        (500, "server_error"),
        (404, "invalid_request_error"),
    ],
)
@pytest.mark.parametrize("stream", [False, True])
async def test_status_directive(make_client, status, error_type, stream):
    client = await make_client()
    response = await post_chat(client, f"x [sim:status={status}]", stream=stream)
    assert response.status == status
    assert response.content_type == "application/json"
    assert (response.headers.get("Retry-After") == "1") is (status == 429)
    assert await response.json() == {
        "error": {
            "message": f"simulated error {status}",
            "type": error_type,
            "code": None,
            "param": None,
        }
    }
    [record] = await sim_records(client)
    assert record["outcome"] == "error"


@pytest.mark.parametrize("authorization", [None, "", "Bearer", "Bearer   ", "Basic abc", "sk-test"])
async def test_missing_or_bad_credentials_get_401(make_client, authorization):
    client = await make_client()
    headers = {} if authorization is None else {"Authorization": authorization}
    response = await client.post(PATH, json=chat("hi"), headers=headers)
    assert response.status == 401
    error = (await response.json())["error"]
    assert error["type"] == "invalid_request_error"
    assert error["code"] == "invalid_api_key"
    assert error["param"] is None and error["message"]
    [record] = await sim_records(client)
    assert record["outcome"] == "error" and record["body"] == chat("hi")


@pytest.mark.parametrize(
    "raw",
    [
        b"{not json",
        b"",
        orjson.dumps({"messages": [{"role": "user", "content": "hi"}]}),
        orjson.dumps({"model": "m"}),
        orjson.dumps({"model": "m", "messages": []}),
        orjson.dumps({"model": "m", "messages": "hi"}),
        orjson.dumps(chat("[sim:tokens=lots]")),
        orjson.dumps(chat("[sim:bogus]")),
    ],
)
async def test_bad_requests_get_400(make_client, raw):
    client = await make_client()
    headers = {**AUTH, "Content-Type": "application/json"}
    response = await client.post(PATH, data=raw, headers=headers)
    assert response.status == 400
    error = (await response.json())["error"]
    assert error["type"] == "invalid_request_error" and error["message"]


# --- timing and connection behaviour ----------------------------------------------------


async def test_latency_setting_and_directive(make_client):
    client = await make_client(latency_ms=1500)
    started = time.monotonic()
    response = await client.post(PATH, json=chat("hi"), headers=AUTH)
    assert response.status == 200
    assert time.monotonic() - started >= 1.49

    started = time.monotonic()
    response = await client.post(PATH, json=chat("hi [sim:latency_ms=0]"), headers=AUTH)
    assert response.status == 200
    assert time.monotonic() - started < 0.75  # not the setting's 1.5 s (a loaded machine may take a while)

    # For a stream the latency is before the headers
    started = time.monotonic()
    response = await post_chat(client, "hi [sim:latency_ms=300]", stream=True)
    assert time.monotonic() - started >= 0.29
    assert (await sse_events(response))[-1] == "[DONE]"


@pytest.mark.parametrize("stream", [False, True])
async def test_hang_never_answers(make_client, handler_cancellation, stream):
    client = await make_client(handler_cancellation=handler_cancellation)
    started = time.monotonic()
    with pytest.raises(asyncio.TimeoutError):
        await client.post(
            PATH,
            json=chat("[sim:hang]", stream=stream),
            headers=AUTH,
            timeout=aiohttp.ClientTimeout(total=0.3),
        )
    assert time.monotonic() - started >= 0.29
    # the client gave up and closed its connection; the simulator notices
    await wait_for_outcome(client, 1, "disconnected")


async def test_drop_after_aborts_stream_after_k_tokens(make_client, handler_cancellation):
    client = await make_client(handler_cancellation=handler_cancellation)
    response = await client.post(PATH, json=chat("[sim:drop_after=2]", stream=True), headers=AUTH)
    assert response.status == 200
    received = []
    with pytest.raises(aiohttp.ClientPayloadError):
        async for line in response.content:
            if line.strip():
                received.append(decode_event(line))
    assert [c["choices"][0]["delta"] for c in received] == [
        {"role": "assistant", "content": ""},
        {"content": "the "},
        {"content": "quick "},
    ]
    await wait_for_outcome(client, 1, "dropped")


async def test_client_leaving_during_latency_is_recorded_as_disconnected(
    make_client, handler_cancellation
):
    client = await make_client(handler_cancellation=handler_cancellation, latency_ms=60_000)
    with pytest.raises(asyncio.TimeoutError):
        await client.post(
            PATH, json=chat("hi"), headers=AUTH, timeout=aiohttp.ClientTimeout(total=0.2)
        )
    await wait_for_outcome(client, 1, "disconnected", timeout=30)  # during the latency, not after it


async def test_drop_after_zero_sends_only_the_role_chunk(make_client):
    client = await make_client()
    response = await client.post(PATH, json=chat("[sim:drop_after=0]", stream=True), headers=AUTH)
    assert (await next_event(response))["choices"][0]["delta"] == ROLE_DELTA
    with pytest.raises(aiohttp.ClientPayloadError):
        await response.content.read()


async def test_drop_after_without_stream_aborts_without_response(make_client, handler_cancellation):
    client = await make_client(handler_cancellation=handler_cancellation)
    with pytest.raises(aiohttp.ServerDisconnectedError):
        await client.post(PATH, json=chat("[sim:drop_after=1]"), headers=AUTH)
    await wait_for_outcome(client, 1, "dropped")
    # the simulator itself is fine afterwards
    assert (await client.post(PATH, json=chat("hi"), headers=AUTH)).status == 200


async def test_hang_after_goes_silent_and_records_disconnect(make_client, handler_cancellation):
    client = await make_client(handler_cancellation=handler_cancellation)
    response = await client.post(PATH, json=chat("[sim:hang_after=2]", stream=True), headers=AUTH)
    deltas = [(await next_event(response))["choices"][0]["delta"] for _ in range(3)]
    assert deltas == [ROLE_DELTA, {"content": "the "}, {"content": "quick "}]
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(next_event(response), timeout=0.3)
    [record] = await sim_records(client)
    assert record["outcome"] == "pending"
    response.close()  # the client goes away mid-stream
    await wait_for_outcome(client, 1, "disconnected")


async def test_client_leaving_a_paced_stream_is_recorded_as_disconnected(
    make_client, handler_cancellation
):
    client = await make_client(handler_cancellation=handler_cancellation, tokens_per_second=20)
    response = await client.post(PATH, json=chat("[sim:tokens=1000]", stream=True), headers=AUTH)
    await next_event(response)
    await next_event(response)
    response.close()
    started = time.monotonic()
    await wait_for_outcome(client, 1, "disconnected")
    assert time.monotonic() - started < 25  # noticed promptly, not after the 50 s stream


# --- recording ------------------------------------------------------------------------------


async def test_recording_and_clearing(make_client):
    client = await make_client()
    assert await (await client.get("/_sim/health")).json() == {"status": "ok"}
    headers = {**AUTH, "X-Custom-Header": "Yes"}
    await client.post(PATH + "?trace=1", json=chat("first"), headers=headers)
    await client.post(PATH, json=chat("second", stream=True), headers=AUTH)
    await client.post(PATH, data=b"garbage", headers=AUTH)
    await client.get("/v1/models", headers=AUTH)  # unknown route: still recorded
    first, second, third, fourth = await sim_records(client)
    assert [r["seq"] for r in (first, second, third, fourth)] == [1, 2, 3, 4]
    assert first["method"] == "POST" and first["path"] == PATH
    assert first["query"] == {"trace": "1"}
    assert first["headers"]["x-custom-header"] == "Yes"
    assert first["headers"]["authorization"] == "Bearer sk-test"
    assert all(name == name.lower() for name in first["headers"])
    assert first["body"] == chat("first") and first["outcome"] == "completed"
    assert second["body"]["stream"] is True and second["outcome"] == "completed"
    assert third["body"] is None and third["outcome"] == "error"
    assert fourth["method"] == "GET" and fourth["outcome"] == "error"

    cleared = await client.delete("/_sim/requests")
    assert cleared.status == 200
    assert await sim_records(client) == []
    await client.post(PATH, json=chat("after"), headers=AUTH)
    [after] = await sim_records(client)
    assert after["seq"] == 5 and after["body"] == chat("after")


async def test_control_routes_are_not_recorded_and_need_no_auth(make_client):
    client = await make_client()
    for _ in range(2):
        assert (await client.get("/_sim/requests")).status == 200
    assert await sim_records(client) == []


async def test_apps_do_not_share_state(make_client):
    one, two = await make_client(), await make_client()
    await one.post(PATH, json=chat("hi"), headers=AUTH)
    assert len(await sim_records(one)) == 1
    assert await sim_records(two) == []


# --- CLI ------------------------------------------------------------------------------------


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_cli_announces_serves_and_stops_cleanly(signum):
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "simulator", "--port", "0", "--completion-tokens", "3",
        cwd=PROJECT_ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        line = await asyncio.wait_for(process.stdout.readline(), timeout=15)
        ready = orjson.loads(line)
        assert line.startswith(b'{"event": "simulator_ready", "url": "http://127.0.0.1:')
        assert ready["event"] == "simulator_ready"
        port = int(ready["url"].rsplit(":", 1)[1])
        assert port > 0
        async with aiohttp.ClientSession() as session:
            response = await session.post(ready["url"] + PATH, json=chat("hi"), headers=AUTH)
            data = await response.json()
            assert data["choices"][0]["message"]["content"] == "the quick brown "
            # A request that never ends must not keep the process alive after the signal.
            hanging = asyncio.create_task(
                session.post(ready["url"] + PATH, json=chat("[sim:hang]"), headers=AUTH)
            )
            await asyncio.sleep(0.2)
            started = time.monotonic()
            process.send_signal(signum)
            assert await asyncio.wait_for(process.wait(), timeout=10) == 0
            assert time.monotonic() - started < 5
            with pytest.raises(aiohttp.ClientError):
                await hanging
        assert await process.stdout.read() == b""  # exactly one line of output
        assert b"Traceback" not in await process.stderr.read()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
