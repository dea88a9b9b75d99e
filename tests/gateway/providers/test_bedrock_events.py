"""Bedrock's wire as properties: any chat body is translated or refused with a 400; and
ConverseStream's event stream decoded incrementally (botocore's decoder, the simulator's
independent encoder): however the bytes are split on the wire, the same events come out, a
frame with a wrong CRC is refused, and an exception message raises AWS's error."""

import asyncio
import itertools
import time

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.chat.request import ChatRequest
from gateway.edge.errors import ApiError, UpstreamError
from gateway.providers.bedrock.converse import converse_body
from gateway.providers.bedrock.events import decoded
from simulator.bedrock_eventstream import event, exception

EVENTS = [("messageStart", {"role": "assistant"}),
          *[("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": f"word{i} "}}) for i in range(20)],
          ("messageStop", {"stopReason": "end_turn"}),
          ("metadata", {"usage": {"inputTokens": 3, "outputTokens": 20, "totalTokens": 23}, "metrics": {}})]
WIRE = b"".join(event(kind, payload) for kind, payload in EVENTS)


async def parts(data: bytes, cuts: list[int]):
    edges = [0, *sorted(set(cuts)), len(data)]
    for start, end in itertools.pairwise(edges):
        yield data[start:end]


def decode_all(data: bytes, cuts: list[int]) -> list[tuple[str, dict]]:
    async def run() -> list[tuple[str, dict]]:
        return [message async for message in decoded(parts(data, cuts))]
    return asyncio.run(run())


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=len(WIRE) - 1), max_size=60))
def test_any_split_of_the_bytes_decodes_to_the_same_events(cuts):
    got = decode_all(WIRE, cuts)
    assert [kind for kind, _ in got] == [kind for kind, _ in EVENTS]
    assert [{k: v for k, v in payload.items() if k != "p"} for _, payload in got] == [p for _, p in EVENTS]


@settings(max_examples=100, deadline=None)
@given(st.integers(min_value=0, max_value=len(WIRE) - 1), st.integers(min_value=1, max_value=255))
def test_a_flipped_byte_never_passes_as_an_event(position, flip):
    broken = bytearray(WIRE)
    broken[position] ^= flip
    with pytest.raises(UpstreamError) as raised:
        decode_all(bytes(broken), [])
    assert raised.value.status == 502


def test_an_exception_message_raises_awss_error_with_its_status():
    wire = event(*EVENTS[0]) + exception("throttlingException", "slow down")
    with pytest.raises(UpstreamError) as raised:
        decode_all(wire, [7])
    assert raised.value.status == 429 and "ThrottlingException: slow down" in raised.value.message


def test_decoding_cost_per_mebibyte_is_reported_not_asserted(capsys):
    """The cost of decoding, printed for the record (bench/ measures it against the rest)."""
    payload = WIRE * 200
    started = time.process_time()
    assert len(decode_all(payload, list(range(0, len(payload), 1400)))) == len(EVENTS) * 200
    seconds = time.process_time() - started
    print(f"decoded {len(payload) / 2**20:.2f} MiB in {seconds * 1000:.1f} ms CPU")


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                    max_leaves=12)
TEXT = st.text(max_size=12)
IMAGE = st.sampled_from(["data:image/png;base64,iVBORw0KGgo=", "data:image/bmp;base64,Qk0=", "https://x/y.png",
                         "data:image/png;base64,!!", ""])
PART = st.one_of(st.fixed_dictionaries({"type": st.just("text"), "text": TEXT}),
                 st.fixed_dictionaries({"type": st.just("image_url"), "image_url": st.one_of(
                     st.fixed_dictionaries({"url": IMAGE}), IMAGE, JSON)}),
                 st.fixed_dictionaries({"type": st.sampled_from(["input_audio", "file", "x"])}), JSON)
CALL = st.one_of(st.fixed_dictionaries({"id": TEXT, "type": st.just("function"), "function": st.fixed_dictionaries(
    {"name": TEXT, "arguments": st.one_of(st.sampled_from(["{}", '{"a": 1}', "[]", "nope"]), TEXT)})}), JSON)
MESSAGE = st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "system", "developer", "tool"])},
                                optional={"content": st.one_of(TEXT, st.none(), st.lists(PART, max_size=3)),
                                          "tool_calls": st.lists(CALL, max_size=2), "tool_call_id": TEXT})
TOOL = st.fixed_dictionaries({"type": st.sampled_from(["function", "x"]), "function": st.fixed_dictionaries(
    {"name": TEXT}, optional={"description": TEXT, "parameters": JSON})})
FORMAT = st.one_of(st.fixed_dictionaries({"type": st.sampled_from(["text", "json_object", "json_schema"])},
                                         optional={"json_schema": st.fixed_dictionaries({"name": TEXT},
                                                                                        optional={"schema": JSON})}))
BODY = st.fixed_dictionaries({"messages": st.lists(MESSAGE, min_size=1, max_size=4)}, optional={
    "tools": st.lists(TOOL, max_size=2), "response_format": FORMAT, "n": st.integers(1, 3),
    "tool_choice": st.one_of(st.sampled_from(["auto", "none", "required", "x"]), st.fixed_dictionaries(
        {"type": st.just("function"), "function": st.fixed_dictionaries({"name": TEXT})})),
    "stop": st.one_of(TEXT, st.lists(TEXT, max_size=3)), "max_tokens": st.integers(1, 10**6),
    "max_completion_tokens": st.integers(1, 10**6), "temperature": st.floats(0, 2), "top_p": st.floats(0, 1)})


@settings(max_examples=500, deadline=None)
@given(BODY)
def test_any_chat_body_is_translated_or_refused_with_a_400(body):
    """Whatever JSON a client puts where Converse's parts go, past the edge's own checks
    (ChatRequest): a Converse body, or a 400 naming the field, never an exception the gateway
    would answer as a 500."""
    try:
        msgspec.convert({"model": "m", **body}, ChatRequest)
    except msgspec.ValidationError:
        return  # the edge answers 400 first
    refused = None
    try:
        converse_body(body)
    except ApiError as exc:
        refused = exc
    assert refused is None or (refused.status == 400 and refused.param)
