"""The simulator's POST /v1/completions (OpenAI legacy text completions) and Anthropic's
POST /v1/messages/count_tokens."""

import orjson
import pytest

from simulator.textgen import completion_text

AUTH = {"Authorization": "Bearer sk-test"}
ANTHROPIC = {"x-api-key": "sk-ant-test", "anthropic-version": "2023-06-01"}


async def frames(response) -> list:
    lines = [line.strip() async for line in response.content]
    return [line.removeprefix(b"data: ") for line in lines if line.startswith(b"data: ")]


async def test_a_completion_counts_prompt_words_and_defaults_to_16_tokens(make_client):
    client = await make_client(completion_tokens=40)
    response = await client.post("/v1/completions", json={"model": "m", "prompt": "one two three"}, headers=AUTH)
    body = await response.json()
    assert body["object"] == "text_completion" and body["choices"][0]["text"] == completion_text(16)
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"] == {"prompt_tokens": 3, "completion_tokens": 16, "total_tokens": 19}


async def test_a_list_prompt_answers_one_choice_per_prompt(make_client):
    client = await make_client()
    body = {"model": "m", "prompt": ["a b", "c [sim:tokens=2]"], "max_tokens": 5}
    answer = await (await client.post("/v1/completions", json=body, headers=AUTH)).json()
    assert [c["text"] for c in answer["choices"]] == [completion_text(2)] * 2
    assert answer["usage"]["completion_tokens"] == 4 and answer["choices"][1]["finish_reason"] == "stop"


async def test_a_stream_sends_text_chunks_then_the_finish_usage_and_done(make_client):
    client = await make_client()
    body = {"model": "m", "prompt": "x [sim:tokens=3]", "stream": True, "stream_options": {"include_usage": True}}
    sent = await frames(await client.post("/v1/completions", json=body, headers=AUTH))
    chunks = [orjson.loads(frame) for frame in sent[:-1]]
    assert "".join(c["choices"][0]["text"] for c in chunks if c["choices"]) == completion_text(3)
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 3
    assert sent[-1] == b"[DONE]"


@pytest.mark.parametrize("body", [{"model": "m"}, {"model": "m", "prompt": 5}, {"prompt": "x"}])
async def test_invalid_completion_requests_are_400(make_client, body):
    client = await make_client()
    assert (await client.post("/v1/completions", json=body, headers=AUTH)).status == 400


async def test_a_simulated_error_status(make_client):
    client = await make_client()
    response = await client.post("/v1/completions", json={"model": "m", "prompt": "[sim:status=503]"}, headers=AUTH)
    assert response.status == 503


async def test_count_tokens_follows_the_messages_rule(make_client):
    client = await make_client()
    body = {"model": "claude", "system": "be brief", "messages": [{"role": "user", "content": "one two three"}]}
    response = await client.post("/v1/messages/count_tokens", json=body, headers=ANTHROPIC)
    assert await response.json() == {"input_tokens": (2 + 4) + (3 + 4)}


@pytest.mark.parametrize(("body", "headers", "status"), [
    ({"model": "c", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}, ANTHROPIC, 400),
    ({"model": "c", "messages": []}, ANTHROPIC, 400),
    ({"model": "c", "messages": [{"role": "user", "content": "x"}]}, {"x-api-key": "k"}, 400),
    ({"model": "c", "messages": [{"role": "user", "content": "x"}]}, {"anthropic-version": "2023-06-01"}, 401),
    ({"model": "c", "messages": [{"role": "user", "content": "x [sim:status=429]"}]}, ANTHROPIC, 429),
])
async def test_count_tokens_refusals(make_client, body, headers, status):
    client = await make_client()
    assert (await client.post("/v1/messages/count_tokens", json=body, headers=headers)).status == status
