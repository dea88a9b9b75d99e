"""The upstream simulator's Anthropic Messages route: JSON, the SSE event sequence, tools,
stop sequences, cache usage, errors and credentials, checked against the official SDK too."""

import asyncio
from typing import Any

import aiohttp
import orjson
import pytest

from simulator.anthropic_messages import FRAGMENT_CHARS, cut_at_stop, json_fragments, tool_input
from simulator.textgen import WORDS, iter_tokens
from tests.support import sim_records

PATH = "/v1/messages"
NO_CACHE_WRITES = {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0}  # usage.cache_creation
HEADERS = {"x-api-key": "sk-ant-test", "anthropic-version": "2023-06-01"}
WEATHER = {"name": "get_weather", "description": "Weather of a city",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                                                             "metric": {"type": "boolean"}}}}


def expected_text(n: int) -> str:
    return "".join(WORDS[i % len(WORDS)] + " " for i in range(n))


def request(content: Any = "hello there", **extra: Any) -> dict[str, Any]:
    return {"model": "claude-sim", "max_tokens": 100, "messages": [{"role": "user", "content": content}], **extra}


async def post(client, body: dict[str, Any], headers: dict[str, str] = HEADERS) -> aiohttp.ClientResponse:
    return await client.post(PATH, json=body, headers=headers)


async def events_of(response: aiohttp.ClientResponse) -> list[tuple[str, dict[str, Any]]]:
    """(event name, data) of each SSE frame; checks that data repeats the name as its type."""
    frames = (await response.text()).split("\n\n")
    events = []
    for frame in filter(None, frames):
        name_line, data_line = frame.split("\n")
        name, data = name_line.removeprefix("event: "), orjson.loads(data_line.removeprefix("data: "))
        assert data["type"] == name
        events.append((name, data))
    return events


# -- pure rules -------------------------------------------------------------------------------

def test_tool_input_has_a_sample_per_property_and_streams_in_fragments():
    value = tool_input(WEATHER["input_schema"])
    assert value == {"city": "the quick brown fox", "days": 7, "metric": True}
    fragments = json_fragments(value)
    assert "".join(fragments) == orjson.dumps(value).decode()
    assert all(len(f) == FRAGMENT_CHARS for f in fragments[:-1])


@pytest.mark.parametrize(("stops", "kept", "stop"), [
    (["fox"], ["the ", "quick ", "brown "], "fox"),
    (["ick b", "zzz"], ["the ", "qu"], "ick b"),
    (["jumps", "brown"], ["the ", "quick "], "brown"),
    (["nowhere"], list(iter_tokens(5)), None),
    ([], list(iter_tokens(5)), None),
])
def test_text_is_cut_before_the_first_stop_sequence(stops, kept, stop):
    assert cut_at_stop(list(iter_tokens(5)), stops) == (kept, stop)


# -- JSON answers -----------------------------------------------------------------------------

async def test_json_message_shape_usage_and_headers(make_client):
    client = await make_client()
    body = request("one two three [sim:tokens=5]", system="be brief")
    response = await post(client, body)
    assert response.status == 200 and response.headers["request-id"].startswith("req_")
    message = await response.json()
    assert message["id"].startswith("msg_") and message.pop("id")
    assert message == {
        "type": "message", "role": "assistant", "model": "claude-sim",
        "content": [{"type": "text", "text": expected_text(5)}], "stop_reason": "end_turn", "stop_sequence": None,
        "usage": {"input_tokens": (2 + 4) + (4 + 4), "cache_creation_input_tokens": 0,
                  "cache_read_input_tokens": 0, "cache_creation": NO_CACHE_WRITES,
                  "output_tokens": 5, "service_tier": "standard"}}
    [record] = await sim_records(client)
    assert record["outcome"] == "completed" and record["body"] == body


async def test_cache_directives_move_prompt_tokens_into_the_cache_fields(make_client):
    client = await make_client()
    message = await (await post(client, request("a b c [sim:cache_read=3] [sim:cache_write=2]"))).json()
    assert message["usage"] == {"input_tokens": 9 - 5, "cache_creation_input_tokens": 2,
                                "cache_read_input_tokens": 3, "output_tokens": 16, "service_tier": "standard",
                                "cache_creation": {"ephemeral_5m_input_tokens": 2, "ephemeral_1h_input_tokens": 0}}


async def test_prompt_tokens_count_text_blocks_and_tool_results(make_client):
    client = await make_client()
    content = [{"type": "tool_result", "tool_use_id": "t1", "content": "eighteen degrees"},
               {"type": "text", "text": "so what now"},
               {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}]
    message = await (await post(client, request(content))).json()
    assert message["usage"]["input_tokens"] == 5 + 4


async def test_max_tokens_truncates_with_stop_reason_max_tokens(make_client):
    client = await make_client()
    message = await (await post(client, request("x [sim:tokens=9]", max_tokens=4))).json()
    assert message["content"][0]["text"] == expected_text(4)
    assert (message["stop_reason"], message["usage"]["output_tokens"]) == ("max_tokens", 4)


async def test_stop_sequences_cut_the_text(make_client):
    client = await make_client()
    message = await (await post(client, request("x", stop_sequences=["nothing", "fox"]))).json()
    assert message["content"] == [{"type": "text", "text": "the quick brown "}]
    assert (message["stop_reason"], message["stop_sequence"]) == ("stop_sequence", "fox")
    assert message["usage"]["output_tokens"] == 3


async def test_refusal_directive(make_client):
    client = await make_client()
    message = await (await post(client, request("x [sim:refusal] [sim:tokens=2]"))).json()
    assert message["stop_reason"] == "refusal"


@pytest.mark.parametrize(("content", "choice", "called"), [
    ("x [sim:tool=get_weather] [sim:tokens=2]", None, True),
    ("x [sim:tokens=2]", {"type": "tool", "name": "get_weather"}, True),
    ("x [sim:tokens=2]", {"type": "any"}, True),
    ("x [sim:tokens=2]", {"type": "auto"}, False),
    ("x [sim:tokens=2]", None, False),
    ("x [sim:tool=get_weather] [sim:tokens=2]", {"type": "none"}, False),
])
async def test_tool_use_when_asked_or_forced(make_client, content, choice, called):
    client = await make_client()
    body = request(content, tools=[{"name": "other", "input_schema": {"type": "object"}}, WEATHER],
                   **({"tool_choice": choice} if choice else {}))
    if choice == {"type": "any"}:
        body["tools"].reverse()  # "any" calls the first tool
    message = await (await post(client, body)).json()
    assert message["content"][0] == {"type": "text", "text": expected_text(2)}
    if not called:
        assert len(message["content"]) == 1 and message["stop_reason"] == "end_turn"
        return
    call = message["content"][1]
    assert call["id"].startswith("toolu_") and call.pop("id")
    assert call == {"type": "tool_use", "name": "get_weather", "input": tool_input(WEATHER["input_schema"])}
    assert message["stop_reason"] == "tool_use"
    assert message["usage"]["output_tokens"] == 2 + len(json_fragments(call["input"]))


# -- streams ----------------------------------------------------------------------------------

async def test_stream_event_sequence(make_client):
    client = await make_client()
    response = await post(client, request("hi [sim:tokens=3] [sim:cache_read=1]", stream=True))
    assert response.headers["Content-Type"].startswith("text/event-stream")
    events = await events_of(response)
    assert [name for name, _ in events] == [
        "message_start", "ping", "content_block_start", "content_block_delta", "content_block_delta",
        "content_block_delta", "content_block_stop", "message_delta", "message_stop"]
    start = events[0][1]["message"]
    assert (start["content"], start["stop_reason"]) == ([], None)
    assert start["usage"] == {"input_tokens": 7 - 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 1,
                              "cache_creation": NO_CACHE_WRITES, "output_tokens": 1, "service_tier": "standard"}
    assert events[2][1] == {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
    assert "".join(data["delta"]["text"] for name, data in events if name == "content_block_delta") == expected_text(3)
    assert events[7][1] == {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                            "usage": {"output_tokens": 3}}
    [record] = await sim_records(client)
    assert record["outcome"] == "completed"


async def test_stream_with_a_tool_call(make_client):
    client = await make_client()
    body = request("x [sim:tokens=1]", stream=True, tools=[WEATHER], tool_choice={"type": "any"})
    events = await events_of(await post(client, body))
    names = [name for name, _ in events]
    assert names[2:] == ["content_block_start", "content_block_delta", "content_block_stop",
                         "content_block_start", "content_block_delta"] + ["content_block_delta"] * len(
        json_fragments(tool_input(WEATHER["input_schema"]))) + ["content_block_stop", "message_delta", "message_stop"]
    start = events[5][1]
    assert start["index"] == 1 and start["content_block"]["type"] == "tool_use"
    assert start["content_block"]["name"] == "get_weather" and start["content_block"]["input"] == {}
    pieces = [data["delta"]["partial_json"] for name, data in events[6:-3]]
    assert pieces[0] == "" and orjson.loads("".join(pieces)) == tool_input(WEATHER["input_schema"])
    assert events[-2][1]["delta"]["stop_reason"] == "tool_use"
    assert events[-2][1]["usage"]["output_tokens"] == 1 + len(pieces) - 1


async def test_stream_error_after_sends_an_error_event(make_client):
    client = await make_client()
    events = await events_of(await post(client, request("x [sim:error_after=2]", stream=True)))
    assert [name for name, _ in events][-3:] == ["content_block_delta", "content_block_delta", "error"]
    assert events[-1][1] == {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}


async def test_error_after_without_stream_is_529(make_client):
    client = await make_client()
    response = await post(client, request("x [sim:error_after=2]"))
    assert response.status == 529 and (await response.json())["error"]["type"] == "overloaded_error"


async def test_stream_drop_after_cuts_the_connection_after_k_deltas(make_client):
    client = await make_client()
    response = await post(client, request("x [sim:drop_after=2]", stream=True))
    received = b""
    with pytest.raises(aiohttp.ClientPayloadError):
        async for chunk in response.content.iter_any():
            received += chunk
    assert received.count(b"event: content_block_delta") == 2 and b"message_stop" not in received
    [record] = await sim_records(client)
    assert record["outcome"] == "dropped"


async def test_stream_hang_after_goes_silent(make_client):
    client = await make_client()
    response = await post(client, request("x [sim:hang_after=1]", stream=True))
    received = b""
    while b"content_block_delta" not in received:
        received += await asyncio.wait_for(response.content.readany(), 5)
    response.close()


# -- errors and credentials -------------------------------------------------------------------

@pytest.mark.parametrize(("status", "error_type"), [
    (400, "invalid_request_error"), (429, "rate_limit_error"), (500, "api_error"), (529, "overloaded_error"),
    (503, "api_error")])
@pytest.mark.parametrize("stream", [False, True])
async def test_status_directive_answers_anthropic_errors(make_client, status, error_type, stream):
    client = await make_client()
    response = await post(client, request(f"x [sim:status={status}]", stream=stream))
    assert response.status == status
    body = await response.json()
    assert body["type"] == "error" and body["request_id"].startswith("req_")
    assert body["error"] == {"type": error_type, "message": f"simulated error {status}"}
    assert (response.headers.get("retry-after") == "1") == (status == 429)


@pytest.mark.parametrize(("body", "message"), [
    ({"model": "m", "messages": [{"role": "user", "content": "x"}]}, "max_tokens: Field required"),
    (request(n=1), "n: Extra inputs are not permitted"),
    (request(stream_options={"include_usage": True}), "stream_options: Extra inputs are not permitted"),
    (request(max_tokens=0), ">= 1"),
    ({"model": "m", "max_tokens": 5, "messages": []}, "length"),
    (request([{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]), "image_url"),
    (request([{"type": "image", "source": {"type": "base64", "media_type": "image/bmp", "data": "AA"}}]), "image/"),
    ({"model": "m", "max_tokens": 5, "messages": [{"role": "system", "content": "x"}]}, "role"),
    (request("[sim:tool=nope]", tools=[WEATHER]), "'nope' is not among"),
    (request("[sim:bogus]"), "bogus"),
])
async def test_invalid_requests_get_400_invalid_request_error(make_client, body, message):
    client = await make_client()
    response = await post(client, body)
    assert response.status == 400
    error = (await response.json())["error"]
    assert error["type"] == "invalid_request_error" and message in error["message"]


async def test_anthropic_version_header_is_required(make_client):
    client = await make_client()
    response = await post(client, request(), headers={"x-api-key": "k"})
    assert response.status == 400
    assert (await response.json())["error"]["message"] == "anthropic-version: header is required"


@pytest.mark.parametrize("headers", [{}, {"x-api-key": " "}, {"Authorization": "Bearer sk-ant-test"}])
async def test_x_api_key_is_required(make_client, headers):
    client = await make_client()
    response = await post(client, request(), headers={"anthropic-version": "2023-06-01", **headers})
    assert response.status == 401
    body = await response.json()
    assert body["type"] == "error" and body["error"]["type"] == "authentication_error"
    [record] = await sim_records(client)
    assert record["outcome"] == "error" and record["body"] == request()


# -- the official SDK parses what the simulator sends -----------------------------------------

async def test_the_anthropic_sdk_reads_json_and_streams(simulator):
    anthropic = pytest.importorskip("anthropic")
    # Recent SDKs send an api_key as a bearer token; the simulator wants x-api-key, as the gateway sends.
    client = anthropic.AsyncAnthropic(base_url=str(simulator.make_url("")), api_key=None, max_retries=0,
                                      default_headers={"x-api-key": "sk-ant-test"})
    message = await client.messages.create(model="claude-sim", max_tokens=50,
                                           messages=[{"role": "user", "content": "hi [sim:tokens=4]"}])
    assert message.content[0].text == expected_text(4) and message.usage.output_tokens == 4
    async with client.messages.stream(model="claude-sim", max_tokens=50, tools=[WEATHER], tool_choice={"type": "any"},
                                      messages=[{"role": "user", "content": "hi [sim:tokens=2]"}]) as stream:
        text = "".join([piece async for piece in stream.text_stream])
        final = await stream.get_final_message()
    assert text == expected_text(2)
    assert final.content[1].input == tool_input(WEATHER["input_schema"]) and final.stop_reason == "tool_use"
    with pytest.raises(anthropic.APIStatusError, match="overloaded_error"):
        async with client.messages.stream(model="claude-sim", max_tokens=50,
                                          messages=[{"role": "user", "content": "[sim:error_after=1]"}]) as stream:
            await stream.get_final_message()
