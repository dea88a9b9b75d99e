"""The batch adapters against the simulator over a real socket: each protocol's batch API driven
through submit, poll and results for every route it batches, each line's usage read as the single
route reads it, errored lines, a batch found again after a "crash", and cancelling (with the
simulator's batches paused, so none ends first)."""

import asyncio
import time
from collections.abc import AsyncIterator

import aiohttp
import orjson
import pytest

from gateway.edge.errors import ApiError, UpstreamError
from gateway.providers import Providers, build
from gateway.providers.base import BatchLine, BatchResult
from gateway.providers.http import Upstream
from gateway.providers.usage import Usage
from tests.support import PROVIDER_KEY

GPT, CLAUDE = "gpt-4o-mini", "claude-haiku-4-5-20251001"


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
def providers(config, session) -> Providers:
    """Every configured adapter, at the simulator, over one real client session."""
    return build(config.providers, Upstream(session, lambda *_: None))


@pytest.fixture
def openai(providers):
    return providers.batch["openai"]


@pytest.fixture
def anthropic(providers):
    return providers.batch["anthropic"]


@pytest.fixture
def pause(session, sim_url):
    """Pause (True) or resume (False) every simulated batch."""
    async def switch(paused: bool) -> None:
        async with session.post(f"{sim_url}/_sim/batches", json={"paused": paused}) as response:
            assert response.status == 200

    return switch


async def each(*lines: BatchLine) -> AsyncIterator[BatchLine]:
    for line in lines:
        yield line


def chat_line(custom_id: str, text: str, model: str = GPT, **extra) -> BatchLine:
    body = {"model": "client-model", "max_tokens": 20, "messages": [{"role": "user", "content": text}], **extra}
    return BatchLine(custom_id, model, body)


async def ended(adapter, upstream_id: str) -> str:
    """Poll until the batch ends; its final status."""
    for _ in range(500):
        batch = await adapter.poll(upstream_id)
        assert batch.id == upstream_id
        if batch.ended:
            return batch.status
        await asyncio.sleep(0.01)
    raise AssertionError(f"batch {upstream_id} never ended")


async def run(adapter, route: str, *lines: BatchLine, batch_id: str = "gb_test") -> dict[str, BatchResult]:
    """Submit `lines`, wait for the batch to end, and read its results by custom_id."""
    upstream_id = await adapter.submit(each(*lines), route=route, batch_id=batch_id)
    await ended(adapter, upstream_id)
    return {result.custom_id: result async for result in adapter.results(upstream_id, route=route)}


def now_us() -> int:
    return time.time_ns() // 1000


# -- openai: Files + Batches ------------------------------------------------------------------------

async def test_openai_chat_lines_are_uploaded_as_sent_and_read_back_with_their_usage(openai, session, sim_url):
    upstream_id = await openai.submit(each(chat_line("a", "hi [sim:tokens=3]", stream=True),
                                           chat_line("b", "no [sim:status=400]")),
                                      route="/v1/chat/completions", batch_id="gb_chat")
    assert await ended(openai, upstream_id) == "completed"
    results = {result.custom_id: result async for result in openai.results(upstream_id, route="/v1/chat/completions")}
    body = results["a"].reply.body
    assert body["object"] == "chat.completion" and results["a"].outcome == "succeeded"
    assert results["a"].reply.usage == Usage(body["usage"]["prompt_tokens"], 3)
    assert (results["b"].reply, results["b"].status, results["b"].outcome) == (None, 400, "errored")
    assert results["b"].message
    batch = await _json(session, f"{sim_url}/v1/batches/{upstream_id}")
    assert batch["metadata"] == {"gateway_batch_id": "gb_chat"} and batch["endpoint"] == "/v1/chat/completions"
    assert batch["completion_window"] == "24h"
    sent = await _bytes(session, f"{sim_url}/v1/files/{batch['input_file_id']}/content")
    first = orjson.loads(sent.splitlines()[0])
    assert first == {"custom_id": "a", "method": "POST", "url": "/v1/chat/completions",
                     "body": {"model": GPT, "max_tokens": 20,
                              "messages": [{"role": "user", "content": "hi [sim:tokens=3]"}]}}


async def test_openai_embeddings_responses_and_completions_lines_read_usage_as_their_routes(openai):
    vectors = await run(openai, "/v1/embeddings",
                        BatchLine("e", "text-embedding-3-small", {"model": "m", "input": ["one two", "three"]}))
    reply = vectors["e"].reply
    assert reply.body["object"] == "list" and len(reply.body["data"]) == 2
    assert reply.usage == Usage(reply.body["usage"]["prompt_tokens"]) and reply.usage.prompt_tokens > 0
    responses = await run(openai, "/v1/responses", BatchLine("r", GPT, {"model": "m", "input": "hi [sim:tokens=4]"}))
    reply = responses["r"].reply
    assert reply.body["object"] == "response" and reply.usage == Usage(reply.body["usage"]["input_tokens"], 4)
    texts = await run(openai, "/v1/completions",
                      BatchLine("t", "gpt-3.5-turbo-instruct", {"model": "m", "prompt": "hi [sim:tokens=2]",
                                                                "max_tokens": 5}))
    reply = texts["t"].reply
    assert reply.body["object"] == "text_completion" and reply.usage == Usage(reply.body["usage"]["prompt_tokens"], 2)


async def test_an_openai_batch_is_found_again_by_its_gateway_batch_id(openai):
    since = now_us()
    upstream_id = await openai.submit(each(chat_line("a", "hi")), route="/v1/chat/completions", batch_id="gb_crash")
    await openai.submit(each(chat_line("a", "hi")), route="/v1/chat/completions", batch_id="gb_other")
    assert await openai.find("gb_crash", since_us=since, lines=1, taken=frozenset()) == upstream_id
    assert await openai.find("gb_never", since_us=since, lines=1, taken=frozenset()) is None
    assert await openai.find("gb_crash", since_us=since, lines=1, taken=frozenset({upstream_id})) is None
    assert await openai.find("gb_crash", since_us=now_us() + 60_000_000, lines=1, taken=frozenset()) is None


async def test_an_openai_batch_found_among_more_than_a_page(openai):
    since = now_us()
    wanted = await openai.submit(each(chat_line("a", "hi")), route="/v1/chat/completions", batch_id="gb_first")
    for number in range(101):  # a later page's worth, listed before it
        await openai.submit(each(chat_line("a", "hi")), route="/v1/chat/completions", batch_id=f"gb_{number}")
    assert await openai.find("gb_first", since_us=since, lines=1, taken=frozenset()) == wanted


async def test_a_cancelled_openai_batch_ends_with_its_unrun_lines_canceled(openai, pause):
    await pause(True)
    upstream_id = await openai.submit(each(chat_line("a", "hi"), chat_line("b", "ho")),
                                      route="/v1/chat/completions", batch_id="gb_cancel")
    assert not (await openai.poll(upstream_id)).ended
    await openai.cancel(upstream_id)
    await pause(False)
    assert await ended(openai, upstream_id) == "cancelled"
    results = [result async for result in openai.results(upstream_id, route="/v1/chat/completions")]
    assert {(r.custom_id, r.status, r.outcome, r.reply) for r in results} == {
        ("a", 0, "canceled", None), ("b", 0, "canceled", None)}


async def test_an_openai_refusal_is_an_upstream_error_and_a_failed_batch_has_no_results(openai):
    with pytest.raises(UpstreamError) as raised:
        await openai.poll("batch_nope")
    assert raised.value.status == 404
    upstream_id = await openai.submit(each(chat_line("a", "hi"), chat_line("a", "hi")),
                                      route="/v1/chat/completions", batch_id="gb_dup")  # fails validation
    assert await ended(openai, upstream_id) == "failed"
    assert [result async for result in openai.results(upstream_id, route="/v1/chat/completions")] == []


# -- anthropic: Message Batches ---------------------------------------------------------------------

def message_line(custom_id: str, text: str, **extra) -> BatchLine:
    body = {"model": "claude-haiku-4-5", "max_tokens": 20, "messages": [{"role": "user", "content": text}], **extra}
    return BatchLine(custom_id, CLAUDE, body)


async def test_anthropic_messages_lines_come_back_as_messages_with_their_usage(anthropic):
    results = await run(anthropic, "/v1/messages", message_line("a", "hi [sim:tokens=3]", stream=True),
                        message_line("b", "no [sim:status=400]"))
    reply = results["a"].reply
    assert reply.body["type"] == "message" and results["a"].outcome == "succeeded"
    # The tier is the one Anthropic reports a batch's answers served at, as the native path reads it.
    assert reply.usage == Usage(reply.body["usage"]["input_tokens"], 3, service_tier="batch")
    assert (results["b"].reply, results["b"].status, results["b"].outcome) == (None, 400, "errored")
    assert results["b"].message.startswith("invalid_request_error")


async def test_anthropic_chat_lines_are_translated_both_ways(anthropic):
    line = chat_line("c", "hi [sim:tokens=2]", model=CLAUDE,
                     messages=[{"role": "system", "content": "Be brief."},
                               {"role": "user", "content": "hi [sim:tokens=2]"}])
    results = await run(anthropic, "/v1/chat/completions", line)
    reply = results["c"].reply
    assert reply.body["object"] == "chat.completion" and reply.body["choices"][0]["message"]["role"] == "assistant"
    assert reply.usage.completion_tokens == 2 and reply.body["usage"]["prompt_tokens"] == reply.usage.prompt_tokens


async def test_an_anthropic_batch_is_found_again_by_when_it_was_made_and_its_size(anthropic):
    since = now_us()
    one = await anthropic.submit(each(message_line("a", "hi")), route="/v1/messages", batch_id="gb_1")
    two = await anthropic.submit(each(message_line("a", "hi"), message_line("b", "hi")), route="/v1/messages",
                                 batch_id="gb_2")
    assert await anthropic.find("gb_1", since_us=since, lines=1, taken=frozenset()) == one
    assert await anthropic.find("gb_2", since_us=since, lines=2, taken=frozenset({one})) == two
    assert await anthropic.find("gb_3", since_us=since, lines=1, taken=frozenset({one})) is None
    assert await anthropic.find("gb_4", since_us=since, lines=3, taken=frozenset()) is None
    assert await anthropic.find("gb_1", since_us=now_us() + 60_000_000, lines=1, taken=frozenset()) is None


async def test_of_two_anthropic_batches_of_one_size_the_earliest_untaken_is_found(anthropic):
    since = now_us()
    first = await anthropic.submit(each(message_line("a", "hi")), route="/v1/messages", batch_id="gb_1")
    second = await anthropic.submit(each(message_line("a", "ho")), route="/v1/messages", batch_id="gb_2")
    assert await anthropic.find("gb_1", since_us=since, lines=1, taken=frozenset()) == first
    assert await anthropic.find("gb_2", since_us=since, lines=1, taken=frozenset({first})) == second


async def test_a_cancelled_anthropic_batch_ends_with_its_unrun_lines_canceled(anthropic, pause):
    await pause(True)
    upstream_id = await anthropic.submit(each(message_line("a", "hi"), message_line("b", "ho")),
                                         route="/v1/messages", batch_id="gb_cancel")
    assert not (await anthropic.poll(upstream_id)).ended
    await anthropic.cancel(upstream_id)
    await pause(False)
    assert await ended(anthropic, upstream_id) == "ended"
    results = [result async for result in anthropic.results(upstream_id, route="/v1/messages")]
    assert {(r.custom_id, r.status, r.outcome, r.reply) for r in results} == {
        ("a", 0, "canceled", None), ("b", 0, "canceled", None)}


async def test_anthropic_refusals_are_upstream_errors(anthropic):
    with pytest.raises(UpstreamError) as raised:
        await anthropic.poll("msgbatch_nope")
    assert raised.value.status == 404
    with pytest.raises(UpstreamError) as raised:
        await anthropic.submit(each(message_line("not valid!", "hi")), route="/v1/messages", batch_id="gb_bad")
    assert raised.value.status == 400


async def test_a_chat_line_anthropic_cannot_take_stops_the_upload_with_its_own_400(anthropic, session, sim_url):
    refused = chat_line("b", "hi", model=CLAUDE, messages=[{"role": "function", "content": "x"}])
    with pytest.raises(ApiError) as raised:
        await anthropic.submit(each(chat_line("a", "hi", model=CLAUDE), refused), route="/v1/chat/completions",
                               batch_id="gb_refused")
    assert raised.value.status == 400 and raised.value.param == "messages"
    assert (await _json(session, f"{sim_url}/_sim/batches"))["data"] == []  # no batch was made of half a body


# -- both ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,route,line", [("openai", "/v1/chat/completions", chat_line("a", "hi")),
                                             ("anthropic", "/v1/messages", message_line("a", "hi"))])
async def test_every_call_carries_an_orgs_own_key_when_it_has_one(providers, session, sim_url, name, route, line):
    adapter, own = providers.batch[name], "sk-org-own-key-0123456789"
    upstream_id = await adapter.submit(each(line), route=route, batch_id="gb_byok", api_key=own)
    await adapter.find("gb_byok", since_us=now_us() - 60_000_000, lines=1, taken=frozenset(), api_key=own)
    while not (await adapter.poll(upstream_id, api_key=own)).ended:
        await asyncio.sleep(0.01)
    assert [result.outcome async for result in adapter.results(upstream_id, route=route, api_key=own)] == [
        "succeeded"]
    sent = [request for request in (await _json(session, f"{sim_url}/_sim/requests"))["data"]
            if request["path"].startswith(("/v1/files", "/v1/batches", "/v1/messages/batches"))]
    assert {request["method"] for request in sent} == {"GET", "POST"}  # upload, create, list, poll, read
    keys = {request["headers"].get("x-api-key") or request["headers"].get("authorization") for request in sent}
    assert keys in ({own}, {f"Bearer {own}"})


# -- helpers ----------------------------------------------------------------------------------------

async def _json(session: aiohttp.ClientSession, url: str) -> dict:
    return orjson.loads(await _bytes(session, url))


async def _bytes(session: aiohttp.ClientSession, url: str) -> bytes:
    headers = {"Authorization": f"Bearer {PROVIDER_KEY}"}
    async with session.get(url, headers=headers) as response:
        assert response.status == 200, await response.text()
        return await response.read()
