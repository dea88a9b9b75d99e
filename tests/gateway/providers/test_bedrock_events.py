"""ConverseStream's event stream decoded incrementally (botocore's decoder, the simulator's
independent encoder): however the bytes are split on the wire, the same events come out, a
frame with a wrong CRC is refused, and an exception message raises AWS's error."""

import asyncio
import itertools
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.edge.errors import UpstreamError
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
