"""The simulator's OpenAI Realtime WebSocket: events, usage, knobs and recording."""

import base64
from typing import Any

import aiohttp
import pytest

from simulator.textgen import WORDS
from tests.support import poll, sim_records, ws_receive, ws_until

PATH = "/v1/realtime?model=gpt-4o-realtime-preview"
AUTH = {"Authorization": "Bearer sk-test", "OpenAI-Beta": "realtime=v1"}
TEXT_RESPONSE = ["response.created", "response.output_item.added", "response.content_part.added"]
TEXT_DONE = ["response.text.done", "response.content_part.done", "response.output_item.done", "response.done"]


def expected_text(n: int) -> str:
    return "".join(WORDS[i % len(WORDS)] + " " for i in range(n))


def user_item(text: str) -> dict[str, Any]:
    return {"type": "conversation.item.create",
            "item": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}}


TEXT_ONLY = {"type": "session.update", "session": {"modalities": ["text"]}}


async def connect(client, **kwargs) -> aiohttp.ClientWebSocketResponse:
    ws = await client.ws_connect(PATH, headers=AUTH, **kwargs)
    assert (await ws_receive(ws))["type"] == "session.created"
    return ws


async def say(ws, text: str, **response: Any) -> list[dict[str, Any]]:
    """Add a user item, ask for a response, and return the response's events."""
    await ws.send_json(user_item(text))
    assert (await ws_receive(ws))["type"] == "conversation.item.created"
    await ws.send_json({"type": "response.create", **({"response": response} if response else {})})
    return await ws_until(ws, "response.done")


async def settled(client) -> list[dict[str, Any]]:
    """The records once none is pending (the server settles a session just after it ends)."""
    return await poll(lambda: sim_records(client), lambda found: all(r["outcome"] != "pending" for r in found))


async def test_session_update_item_and_response_round_trip(make_client):
    client = await make_client()
    ws = await connect(client, protocols=("realtime",))
    assert ws.protocol == "realtime"
    await ws.send_json(TEXT_ONLY)
    updated = await ws_receive(ws)
    assert updated["type"] == "session.updated" and updated["session"]["modalities"] == ["text"]
    await ws.send_json(user_item("one two three"))
    created = await ws_receive(ws)
    assert created["type"] == "conversation.item.created" and created["previous_item_id"] is None
    assert created["item"]["content"] == [{"type": "input_text", "text": "one two three"}]
    await ws.send_json({"type": "response.create"})
    events = await ws_until(ws, "response.done")
    assert [e["type"] for e in events] == TEXT_RESPONSE + ["response.text.delta"] * 16 + TEXT_DONE
    assert "".join(e["delta"] for e in events if e["type"] == "response.text.delta") == expected_text(16)
    assert len({e["event_id"] for e in events}) == len(events)
    done = events[-1]["response"]
    assert done["status"] == "completed" and done["output"][0]["content"] == [
        {"type": "text", "text": expected_text(16)}]
    assert done["usage"] == {
        "total_tokens": 23, "input_tokens": 7, "output_tokens": 16,  # 3 words + 4
        "input_token_details": {"cached_tokens": 0, "text_tokens": 7, "audio_tokens": 0,
                                "cached_tokens_details": {"text_tokens": 0, "audio_tokens": 0}},
        "output_token_details": {"text_tokens": 16, "audio_tokens": 0}}
    await ws.close()


async def test_later_responses_count_the_whole_conversation_and_follow_directives(make_client):
    client = await make_client()
    ws = await connect(client)
    await ws.send_json(TEXT_ONLY)
    await ws_receive(ws)
    first = (await say(ws, "one two three"))[-1]["response"]["usage"]
    second = (await say(ws, "four five [sim:tokens=3] [sim:cache_read=10]"))[-1]["response"]["usage"]
    third = (await say(ws, "six"))[-1]["response"]["usage"]  # directives apply to one response only
    assert (first["input_tokens"], first["output_tokens"]) == (7, 16)
    # the conversation so far: 7, the first answer (16 words + 4), this item (4 words + 4)
    assert (second["input_tokens"], second["output_tokens"]) == (7 + 20 + 8, 3)
    assert second["input_token_details"]["cached_tokens"] == 10
    assert (third["input_tokens"], third["output_tokens"]) == (35 + 7 + 5, 16)
    await ws.close()


async def test_audio_modality_streams_transcript_and_audio(make_client):
    client = await make_client(completion_tokens=2)
    ws = await connect(client)
    events = await say(ws, "hello")
    assert [e["type"] for e in events] == TEXT_RESPONSE + [
        "response.audio.delta", "response.audio_transcript.delta"] * 2 + [
        "response.audio.done", "response.audio_transcript.done", "response.content_part.done",
        "response.output_item.done", "response.done"]
    assert base64.b64decode(events[3]["delta"]) == bytes(48)
    transcript = {"type": "audio", "transcript": expected_text(2)}
    assert events[-1]["response"]["output"][0]["content"] == [transcript]
    assert events[-1]["response"]["usage"]["output_token_details"] == {"text_tokens": 0, "audio_tokens": 2}
    await ws.close()


@pytest.mark.parametrize(("session", "response", "tokens"), [
    ({"max_response_output_tokens": 5}, {}, 5), ({}, {"max_output_tokens": 4}, 4),
    ({"max_response_output_tokens": "inf"}, {}, 16)])
async def test_output_token_limits_cap_the_response(make_client, session, response, tokens):
    client = await make_client()
    ws = await connect(client)
    await ws.send_json({"type": "session.update", "session": {"modalities": ["text"], **session}})
    await ws_receive(ws)
    events = await say(ws, "hi", **response)
    assert events[-1]["response"]["usage"]["output_tokens"] == tokens
    await ws.close()


async def test_binary_frames_are_echoed(make_client):
    client = await make_client()
    ws = await connect(client)
    await ws.send_bytes(b"\x00\x01\x02")
    echoed = await ws.receive()
    assert (echoed.type, echoed.data) == (aiohttp.WSMsgType.BINARY, b"\x00\x01\x02")
    await ws.close()


@pytest.mark.parametrize(("event", "code"), [
    ({"type": "bogus.event", "event_id": "evt_1"}, "invalid_value"), ([1, 2], "invalid_event"),
    ({"type": "session.update"}, "invalid_value"), (user_item("[sim:tokens=lots]"), None)])
async def test_bad_events_get_error_events_and_the_session_goes_on(make_client, event, code):
    client = await make_client()
    ws = await connect(client)
    await ws.send_json(event)
    if code is None:  # the item is fine; its directive fails the response
        assert (await ws_receive(ws))["type"] == "conversation.item.created"
        await ws.send_json({"type": "response.create"})
        code = "invalid_directive"
    error = await ws_receive(ws)
    assert error["type"] == "error" and error["error"]["code"] == code
    if isinstance(event, dict) and "event_id" in event:
        assert error["error"]["event_id"] == "evt_1"
    await ws.send_json(TEXT_ONLY)
    assert (await ws_receive(ws))["type"] == "session.updated"
    await ws.close()


async def test_handshake_and_client_events_are_recorded(make_client):
    client = await make_client()
    ws = await connect(client)
    await ws.send_json(TEXT_ONLY)
    await ws_receive(ws)
    await ws.send_bytes(b"abcd")
    await ws.receive()
    await ws.close()
    [record] = await settled(client)
    assert (record["method"], record["path"], record["query"]) == (
        "GET", "/v1/realtime", {"model": "gpt-4o-realtime-preview"})
    assert record["headers"]["authorization"] == "Bearer sk-test"
    assert record["headers"]["openai-beta"] == "realtime=v1"
    assert record["body"] == [TEXT_ONLY, {"binary_bytes": 4}]
    assert record["outcome"] == "completed"


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Basic abc"}])
async def test_handshake_without_bearer_is_401(make_client, headers):
    client = await make_client()
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        await client.ws_connect(PATH, headers=headers)
    assert refused.value.status == 401
    [record] = await sim_records(client)
    assert record["outcome"] == "error"


async def test_handshake_without_model_or_upgrade_is_400(make_client):
    client = await make_client()
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        await client.ws_connect("/v1/realtime", headers=AUTH)
    assert refused.value.status == 400
    plain = await client.get(PATH, headers=AUTH)
    assert plain.status == 400 and (await plain.json())["error"]["message"]


async def test_refusal_control_fails_handshakes_until_reset(make_client):
    client = await make_client()
    set_refusal = await client.post("/_sim/realtime", json={"status": 429})
    assert (await set_refusal.json()) == {"status": 429, "hang": False}
    for _ in range(2):
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await client.ws_connect(PATH, headers=AUTH)
        assert refused.value.status == 429 and refused.value.headers["Retry-After"] == "1"
    assert (await client.post("/_sim/realtime", json={"status": 200})).status == 400
    await client.post("/_sim/realtime", json={})
    await (await connect(client)).close()
    assert [r["outcome"] for r in await settled(client)] == ["error", "error", "completed"]


async def test_close_after_closes_the_session_cleanly(make_client, handler_cancellation):
    client = await make_client(handler_cancellation=handler_cancellation)
    ws = await connect(client)
    await ws.send_json(TEXT_ONLY)
    await ws_receive(ws)
    await ws.send_json(user_item("bye [sim:close_after=2]"))
    await ws_receive(ws)
    await ws.send_json({"type": "response.create"})
    events = [await ws_receive(ws) for _ in range(5)]
    assert [e["type"] for e in events] == TEXT_RESPONSE + ["response.text.delta"] * 2
    closing = await ws.receive()
    assert closing.type is aiohttp.WSMsgType.CLOSE and closing.data == 1000
    [record] = await settled(client)
    assert record["outcome"] == "completed"


async def test_drop_after_aborts_the_connection(make_client, handler_cancellation):
    client = await make_client(handler_cancellation=handler_cancellation)
    ws = await connect(client)
    await ws.send_json(TEXT_ONLY)
    await ws_receive(ws)
    await ws.send_json(user_item("[sim:drop_after=1]"))
    await ws_receive(ws)
    await ws.send_json({"type": "response.create"})
    events = [await ws_receive(ws) for _ in range(4)]
    assert events[-1]["type"] == "response.text.delta"
    gone = await ws.receive()
    assert gone.type in (aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.ERROR)  # no close frame
    [record] = await settled(client)
    assert record["outcome"] == "dropped"


async def test_hang_after_stops_the_response_but_not_the_session(make_client):
    client = await make_client()
    ws = await connect(client)
    await ws.send_json(TEXT_ONLY)
    await ws_receive(ws)
    await ws.send_json(user_item("wait [sim:hang_after=1]"))
    await ws_receive(ws)
    await ws.send_json({"type": "response.create"})
    assert [(await ws_receive(ws))["type"] for _ in range(4)][-1] == "response.text.delta"
    await ws.send_json({"type": "session.update", "session": {"instructions": "x"}})
    assert (await ws_receive(ws))["type"] == "session.updated"  # nothing more of the response came
    await ws.close()
