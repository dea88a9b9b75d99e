"""A lying cloud: every hostile fault of the simulator, on Vertex's Claude and Gemini and on
Azure, streamed and not, is answered as a failure and charged nothing (Bedrock's are in
test_bedrock_wire). The same faults on OpenAI, Anthropic and Gemini: tests/gateway/providers/
test_hostile_upstream.py."""

import orjson
import pytest

from ledger.events import RequestCompleted
from tests.support import auth, sse_lines

FAULTS = ["usage=negative", "usage=string", "usage=huge", "usage=float", "usage=bool", "usage=cached_over",
          "malformed", "bad_chunk", "no_end"]
MODELS = ["vertex/claude-haiku-4-5", "vertex/gemini-2.5-flash", "azure/gpt-4o-mini"]


STREAM_ONLY = ("bad_chunk", "no_end")
CASES = [(fault, stream) for fault in FAULTS for stream in (False, True) if stream or fault not in STREAM_ONLY]


@pytest.mark.parametrize(("fault", "stream"), CASES)
@pytest.mark.parametrize("model", MODELS)
async def test_a_lying_cloud_is_a_failure_and_charges_nothing(gateway, org, model, fault, stream):
    response = await gateway.client.post("/v1/chat/completions", headers=auth(org["api_key"]), json={
        "model": model, "max_tokens": 20, "stream": stream,
        "messages": [{"role": "user", "content": f"x [sim:{fault}] [sim:tokens=3]"}]})
    if stream:
        lines = await sse_lines(response)
        assert lines[-1] == b"[DONE]" and orjson.loads(lines[-2])["error"]["type"] == "gateway_error"
    else:
        assert response.status == 502, await response.text()
    (event,) = [r.event for r in await gateway.events() if isinstance(r.event, RequestCompleted)]
    assert event.status == 502 and event.charged_inr_nano == 0
