"""The simulator's ConverseStream: AWS's binary event stream, decoded by botocore (which checks
every CRC), in the order Bedrock sends it, paced, and failing mid-stream the ways it can."""

import asyncio
import time

import orjson
import pytest
from botocore.eventstream import ChecksumMismatch, EventStreamBuffer
from botocore.exceptions import EventStreamError
from urllib3.exceptions import ProtocolError

from simulator import bedrock_eventstream as eventstream
from simulator.textgen import iter_tokens
from tests.simulator.test_bedrock_support import BEARER, SONNET, WEATHER, bedrock, call, sim_url, stream_events, user
from tests.support import sim_records, wait_for_outcome


def names(events: list[dict]) -> list[str]:
    return [next(iter(event)) for event in events]


async def test_text_stream_in_order_with_usage_last(make_client):
    client = await make_client()
    events = await stream_events(bedrock(sim_url(client)), modelId=SONNET, messages=user("one two [sim:tokens=3]"),
                                 system=[{"text": "be brief"}])
    assert names(events) == ["messageStart", "contentBlockDelta", "contentBlockDelta", "contentBlockDelta",
                             "contentBlockStop", "messageStop", "metadata"]
    assert events[0] == {"messageStart": {"role": "assistant"}}
    assert [e["contentBlockDelta"]["delta"]["text"] for e in events[1:4]] == list(iter_tokens(3))
    assert events[5] == {"messageStop": {"stopReason": "end_turn"}}
    assert events[6]["metadata"]["usage"] == {"inputTokens": (2 + 4) + (3 + 4), "outputTokens": 3, "totalTokens": 16,
                                              "cacheReadInputTokens": 0, "cacheWriteInputTokens": 0}
    assert events[6]["metadata"]["metrics"]["latencyMs"] >= 0
    record, = await sim_records(client)
    assert record["path"].endswith("/converse-stream") and record["outcome"] == "completed"


async def test_tool_call_stream_and_cache_usage(make_client):
    client = await make_client()
    events = await stream_events(bedrock(sim_url(client)), modelId=SONNET,
                                 messages=user("weather [sim:tokens=1] [sim:cache_read=2]"),
                                 toolConfig={"tools": [WEATHER], "toolChoice": {"tool": {"name": "get_weather"}}})
    kinds = names(events)
    assert kinds[:3] == ["messageStart", "contentBlockDelta", "contentBlockStop"]
    assert kinds[3] == "contentBlockStart" and kinds[-3:] == ["contentBlockStop", "messageStop", "metadata"]
    start = events[3]["contentBlockStart"]
    assert start["contentBlockIndex"] == 1 and start["start"]["toolUse"]["name"] == "get_weather"
    assert start["start"]["toolUse"]["toolUseId"].startswith("tooluse_")
    pieces = [e["contentBlockDelta"]["delta"]["toolUse"]["input"] for e in events[4:-3]]
    assert orjson.loads("".join(pieces)) == {"city": "the quick brown fox", "days": 7}
    assert events[-2] == {"messageStop": {"stopReason": "tool_use"}}
    usage = events[-1]["metadata"]["usage"]
    assert usage["outputTokens"] == 1 + len(pieces) and usage["cacheReadInputTokens"] == 2
    assert usage["inputTokens"] == (3 + 4) - 2


@pytest.mark.parametrize(("exception", "code"), [
    (None, "modelStreamErrorException"),
    ("throttlingException", "throttlingException"),
    ("internalServerException", "internalServerException"),
    ("serviceUnavailableException", "serviceUnavailableException"),
    ("validationException", "validationException"),
])
async def test_an_exception_mid_stream_surfaces_as_botocores_typed_error(make_client, exception, code):
    client = await make_client()
    chosen = f" [sim:stream_exception={exception}]" if exception else ""
    seen: list[dict] = []

    def consume() -> None:
        text = f"hi [sim:tokens=9] [sim:error_after=2]{chosen}"
        answer = bedrock(sim_url(client)).converse_stream(modelId=SONNET, messages=user(text))
        seen.extend(answer["stream"])

    with pytest.raises(EventStreamError) as raised:
        await call(consume)
    assert raised.value.response["Error"]["Code"] == code
    assert "simulated" in raised.value.response["Error"]["Message"]
    assert names(seen) == ["messageStart", "contentBlockDelta", "contentBlockDelta"]


async def test_the_stream_is_paced_so_first_token_comes_early(make_client):
    client = await make_client()
    first: list[float] = []

    def consume() -> float:
        started = time.monotonic()
        text = "hi [sim:tokens=5] [sim:tps=10]"
        stream = bedrock(sim_url(client)).converse_stream(modelId=SONNET, messages=user(text))
        for event in stream["stream"]:
            if "contentBlockDelta" in event and not first:
                first.append(time.monotonic() - started)
        return time.monotonic() - started

    total = await call(consume)
    assert total >= 0.4  # four pauses of 0.1 s between five deltas
    assert first[0] < total - 0.3


async def test_drop_after_cuts_the_connection(make_client):
    client = await make_client()
    seen: list[dict] = []

    def consume() -> None:
        text = "hi [sim:tokens=9] [sim:drop_after=2]"
        stream = bedrock(sim_url(client)).converse_stream(modelId=SONNET, messages=user(text))
        seen.extend(stream["stream"])

    with pytest.raises(ProtocolError):  # the body ends before its length: botocore's urllib3 says so
        await call(consume)
    assert names(seen)[:3] == ["messageStart", "contentBlockDelta", "contentBlockDelta"]
    assert "messageStop" not in names(seen)
    await wait_for_outcome(client, 1, "dropped")


async def test_hang_after_goes_silent_until_the_client_leaves(make_client):
    client = await make_client()
    response = await client.post(f"/model/{SONNET}/converse-stream", json={"messages": user("hi [sim:hang_after=1]")},
                                 headers=BEARER)
    assert response.status == 200
    buffer = EventStreamBuffer()
    buffer.add_data(await response.content.read(1))
    with pytest.raises(asyncio.TimeoutError):
        async with asyncio.timeout(0.5):
            while True:
                buffer.add_data(await response.content.readany())
    response.close()
    await wait_for_outcome(client, 1, "disconnected")


async def test_frames_decode_with_botocores_buffer_and_a_flipped_byte_is_caught(make_client):
    client = await make_client()
    response = await client.post(f"/model/{SONNET}/converse-stream", json={"messages": user("hi [sim:tokens=2]")},
                                 headers=BEARER)
    assert response.headers["Content-Type"] == "application/vnd.amazon.eventstream"
    assert response.headers["x-amzn-RequestId"]
    raw = await response.read()
    buffer = EventStreamBuffer()
    buffer.add_data(raw)
    messages = list(buffer)
    assert [m.headers[":event-type"] for m in messages] == [
        "messageStart", "contentBlockDelta", "contentBlockDelta", "contentBlockStop", "messageStop", "metadata"]
    for message in messages:
        assert message.headers[":message-type"] == "event"
        assert message.headers[":content-type"] == "application/json"
        payload = orjson.loads(message.payload)
        assert isinstance(payload.pop("p"), str)  # AWS's padding
    for position in (2, 9, len(raw) // 2, len(raw) - 1):  # prelude, prelude CRC, a payload, a message CRC
        spoiled = bytearray(raw)
        spoiled[position] ^= 0x01
        with pytest.raises(ChecksumMismatch):
            broken = EventStreamBuffer()
            broken.add_data(bytes(spoiled))
            list(broken)


def test_the_encoder_writes_what_botocore_reads():
    frame = eventstream.exception("throttlingException", "slow down") + eventstream.event("messageStop", {"a": 1},
                                                                                         pad=False)
    buffer = EventStreamBuffer()
    buffer.add_data(frame)
    first, second = list(buffer)
    assert first.headers == {":exception-type": "throttlingException", ":content-type": "application/json",
                             ":message-type": "exception"}
    assert orjson.loads(first.payload) == {"message": "slow down"}
    assert second.headers[":event-type"] == "messageStop" and orjson.loads(second.payload) == {"a": 1}


async def test_a_hostile_stream_spoils_usage_and_ends_without_its_closing_events(make_client):
    client = await make_client()
    sim = bedrock(sim_url(client))
    spoiled = await stream_events(sim, modelId=SONNET, messages=user("hi [sim:tokens=2] [sim:usage=negative]"))
    assert spoiled[-1]["metadata"]["usage"]["inputTokens"] == -50_000_000
    cut = await stream_events(sim, modelId=SONNET, messages=user("hi [sim:tokens=2] [sim:no_end]"))
    assert names(cut) == ["messageStart", "contentBlockDelta", "contentBlockDelta", "contentBlockStop"]
    answer = await call(sim.converse, modelId=SONNET, messages=user("hi [sim:usage=cached_over]"))
    assert answer["usage"]["cacheReadInputTokens"] > answer["usage"]["inputTokens"]
