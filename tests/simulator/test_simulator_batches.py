"""The upstream simulator's batch APIs, read by the providers' official clients: OpenAI's Files and
Batches (the openai SDK) and Anthropic's Message Batches (the anthropic SDK). Each line is answered
by its endpoint's own logic, directives included; the test holds batches in progress through
POST /_sim/batches and waits for each state with a deadline."""

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import anthropic
import openai
import orjson
import pytest

from simulator.batch_control import BATCHES_KEY
from tests.simulator.test_simulator_tiers import anthropic_client, openai_client, said

CHAT = "/v1/chat/completions"
WAIT_S = 30.0


async def until(check: Callable[[], Awaitable[Any]], timeout: float = WAIT_S) -> Any:
    """The first truthy value of `check()`, polled until `timeout` runs out (then fail)."""
    deadline = time.monotonic() + timeout
    while not (value := await check()):
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)
    return value


@pytest.fixture
async def control(simulator):
    """A plain HTTP client for the simulator's own /_sim routes."""
    async with aiohttp.ClientSession(base_url=str(simulator.make_url("/"))) as session:
        yield session


async def pause(control: aiohttp.ClientSession, paused: bool) -> None:
    async with control.post("/_sim/batches", json={"paused": paused}) as response:
        assert response.status == 200 and await response.json() == {"paused": paused}


async def sim_batches(control: aiohttp.ClientSession) -> dict[str, Any]:
    async with control.get("/_sim/batches") as response:
        return await response.json()


# -- OpenAI: Files and Batches ---------------------------------------------------------------------

def jsonl(*records: Any) -> bytes:
    return b"".join((r if isinstance(r, bytes) else orjson.dumps(r)) + b"\n" for r in records)


def chat_line(custom_id: str, text: str, url: str = CHAT, model: str = "gpt-sim") -> dict[str, Any]:
    return {"custom_id": custom_id, "method": "POST", "url": url, "body": {"model": model, "messages": said(text)}}


async def submit(client: openai.AsyncOpenAI, data: bytes, endpoint: str = CHAT, **extra: Any):
    uploaded = await client.files.create(file=("input.jsonl", data, "application/jsonl"), purpose="batch")
    return await client.batches.create(input_file_id=uploaded.id, endpoint=endpoint,  # type: ignore[arg-type]
                                       completion_window="24h", **extra)


async def ended(client: openai.AsyncOpenAI, batch_id: str, status: str = "completed"):
    async def check():
        batch = await client.batches.retrieve(batch_id)
        return batch if batch.status in ("completed", "failed", "cancelled") else None
    batch = await until(check)
    assert batch.status == status
    return batch


async def lines_of(client: openai.AsyncOpenAI, file_id: str | None) -> list[dict[str, Any]]:
    assert file_id is not None
    content = await client.files.content(file_id)
    return [orjson.loads(line) for line in content.content.splitlines()]


BATCH_FIELDS = {"id", "object", "endpoint", "errors", "input_file_id", "completion_window", "status",
                "output_file_id", "error_file_id", "created_at", "in_progress_at", "expires_at", "finalizing_at",
                "completed_at", "failed_at", "expired_at", "cancelling_at", "cancelled_at", "request_counts",
                "metadata"}


async def test_an_openai_batch_answers_each_line_as_its_endpoint_would(simulator, control):
    client = openai_client(simulator)
    data = jsonl(chat_line("a", "one [sim:tokens=3]"), chat_line("b", "two words [sim:tokens=5]"))
    batch = await submit(client, data, metadata={"gateway_batch": "gb-1"})
    assert batch.status == "validating" and batch.id.startswith("batch_")
    assert batch.metadata == {"gateway_batch": "gb-1"}
    done = await ended(client, batch.id)
    assert done.request_counts is not None and done.request_counts.model_dump() == {"total": 2, "completed": 2,
                                                                                      "failed": 0}
    assert done.error_file_id is None and done.in_progress_at and done.finalizing_at and done.completed_at
    lines = await lines_of(client, done.output_file_id)
    assert [line["custom_id"] for line in lines] == ["a", "b"]
    assert all(line["id"].startswith("batch_req_") and line["error"] is None for line in lines)
    single = await client.chat.completions.create(model="gpt-sim", messages=said("two words [sim:tokens=5]"))
    response = lines[1]["response"]
    assert response["status_code"] == 200 and response["request_id"]
    assert response["body"]["object"] == "chat.completion" and response["body"]["usage"] == single.usage.model_dump(
        exclude_none=True)
    raw = await (await control.get(f"/v1/batches/{batch.id}", headers={"Authorization": "Bearer k"})).json()
    assert set(raw) == BATCH_FIELDS


async def test_lines_answered_with_an_error_go_to_the_error_file(simulator):
    client = openai_client(simulator)
    bad_body = {"custom_id": "bad", "method": "POST", "url": CHAT, "body": {"model": "gpt-sim"}}
    batch = await submit(client, jsonl(chat_line("ok", "fine [sim:tokens=2]"), chat_line("boom", "x [sim:status=500]"),
                                       bad_body))
    done = await ended(client, batch.id)
    assert done.request_counts is not None and (done.request_counts.completed, done.request_counts.failed) == (1, 2)
    assert [line["custom_id"] for line in await lines_of(client, done.output_file_id)] == ["ok"]
    errors = {line["custom_id"]: line["response"] for line in await lines_of(client, done.error_file_id)}
    assert errors["boom"]["status_code"] == 500 and errors["boom"]["body"]["error"]["type"] == "server_error"
    assert errors["bad"]["status_code"] == 400 and errors["bad"]["body"]["error"]["type"] == "invalid_request_error"


async def test_a_bad_input_file_fails_the_batch_naming_each_line(simulator, control):
    client = openai_client(simulator)
    data = jsonl(chat_line("a", "hi"), b"{not json", chat_line("c", "hi", url="/v1/embeddings"), chat_line("a", "hi"))
    batch = await submit(client, data)
    failed = await ended(client, batch.id, "failed")
    assert failed.errors is not None and failed.errors.data is not None
    assert [(e.line, e.code) for e in failed.errors.data] == [
        (2, "invalid_json_line"), (3, "url_mismatch"), (4, "duplicate_custom_id")]
    assert failed.failed_at and failed.output_file_id is None and failed.error_file_id is None
    assert failed.in_progress_at is None
    assert (await sim_batches(control))["data"] == [
        {"id": batch.id, "api": "openai", "status": "failed", "lines": 4, "created_at": batch.created_at}]


@pytest.mark.parametrize(("endpoint", "body", "usage_field"), [
    ("/v1/embeddings", {"model": "text-embedding-3-small", "input": "three words here"}, "prompt_tokens"),
    ("/v1/responses", {"model": "gpt-sim", "input": "hello [sim:tokens=4]"}, "output_tokens"),
    ("/v1/completions", {"model": "gpt-sim", "prompt": "say [sim:tokens=4]", "max_tokens": 10}, "completion_tokens"),
])
async def test_every_batchable_endpoint_reports_its_usage_per_line(simulator, endpoint, body, usage_field):
    client = openai_client(simulator)
    batch = await submit(client, jsonl({"custom_id": "one", "method": "POST", "url": endpoint, "body": body}), endpoint)
    line, = await lines_of(client, (await ended(client, batch.id)).output_file_id)
    usage = line["response"]["body"]["usage"]
    assert usage[usage_field] in (3, 4)


async def test_a_paused_batch_stays_in_progress_until_cancelled(simulator, control):
    client = openai_client(simulator)
    await pause(control, True)
    batch = await submit(client, jsonl(chat_line("a", "hi"), chat_line("b", "hi")))
    running = await until(lambda: _with_status(client, batch.id, "in_progress"))
    assert running.request_counts.total == 2 and running.request_counts.completed == 0
    cancelling = await client.batches.cancel(batch.id)
    assert cancelling.status == "cancelling" and cancelling.cancelling_at
    done = await ended(client, batch.id, "cancelled")
    assert done.cancelled_at and done.output_file_id is None
    errors = await lines_of(client, done.error_file_id)
    assert [(e["custom_id"], e["response"], e["error"]["code"]) for e in errors] == [
        ("a", None, "batch_cancelled"), ("b", None, "batch_cancelled")]
    with pytest.raises(openai.BadRequestError):
        await client.batches.cancel(batch.id)


async def _with_status(client: openai.AsyncOpenAI, batch_id: str, status: str):
    batch = await client.batches.retrieve(batch_id)
    return batch if batch.status == status else None


async def test_resuming_lets_held_batches_end(simulator, control):
    client = openai_client(simulator)
    await pause(control, True)
    batch = await submit(client, jsonl(chat_line("a", "hi")))
    await until(lambda: _with_status(client, batch.id, "in_progress"))
    assert (await sim_batches(control))["paused"] is True
    await pause(control, False)
    assert (await ended(client, batch.id)).request_counts.completed == 1


async def test_app_cleanup_stops_the_workers_of_held_batches(simulator, control):
    await pause(control, True)
    client = openai_client(simulator)
    batch = await submit(client, jsonl(chat_line("a", "hi")))
    await until(lambda: _with_status(client, batch.id, "in_progress"))
    workers = simulator.app[BATCHES_KEY].tasks
    assert len(workers) == 1
    await simulator.close()
    assert not workers


async def test_batches_list_newest_first_in_pages(simulator, control):
    client = openai_client(simulator)
    created = [(await submit(client, jsonl(chat_line(f"l{i}", "hi")))).id for i in range(3)]
    first = await client.batches.list(limit=2)
    assert [b.id for b in first.data] == created[:0:-1] and first.has_more
    rest = await client.batches.list(limit=2, after=first.data[-1].id)
    assert [b.id for b in rest.data] == created[:1] and not rest.has_more
    assert [b.id async for b in client.batches.list(limit=2)] == created[::-1]
    listed = (await sim_batches(control))["data"]
    assert sorted(b["id"] for b in listed) == sorted(created) and {b["lines"] for b in listed} <= {0, 1}


async def test_files_are_listed_read_and_deleted(simulator):
    client = openai_client(simulator)
    uploaded = await client.files.create(file=("in.jsonl", b'{"x": 1}\n', "application/jsonl"), purpose="batch")
    assert (uploaded.object, uploaded.bytes, uploaded.status, uploaded.filename) == ("file", 9, "processed", "in.jsonl")
    assert uploaded.expires_at == uploaded.created_at + 30 * 86400
    assert (await client.files.retrieve(uploaded.id)).id == uploaded.id
    assert [f.id async for f in client.files.list(purpose="batch")] == [uploaded.id]
    assert (await client.files.content(uploaded.id)).content == b'{"x": 1}\n'
    assert (await client.files.delete(uploaded.id)).deleted
    with pytest.raises(openai.NotFoundError):
        await client.files.retrieve(uploaded.id)
    with pytest.raises(openai.BadRequestError):
        await client.files.create(file=("in.txt", b"x", "text/plain"), purpose="batch")


async def test_fifty_thousand_lines_end_promptly(simulator):
    client = openai_client(simulator)
    data = jsonl(*(chat_line(f"r{i}", "hi [sim:tokens=2]") for i in range(50_000)))
    started = time.monotonic()
    batch = await submit(client, data)
    done = await ended(client, batch.id)
    assert done.request_counts is not None and done.request_counts.completed == 50_000
    content = await client.files.content(done.output_file_id or "")
    assert content.content.count(b"\n") == 50_000
    assert time.monotonic() - started < 20


async def test_batch_routes_want_the_providers_credentials(simulator, control):
    async with control.get("/v1/batches") as response:
        assert response.status == 401
    async with control.get("/v1/messages/batches", headers={"anthropic-version": "2023-06-01"}) as response:
        assert response.status == 401 and (await response.json())["error"]["type"] == "authentication_error"


# -- Anthropic: Message Batches --------------------------------------------------------------------

def message_request(custom_id: str, text: str, **params: Any) -> dict[str, Any]:
    return {"custom_id": custom_id, "params": {"model": "claude-sim", "max_tokens": 50, "messages": said(text),
                                               **params}}


async def batch_ended(client: anthropic.AsyncAnthropic, batch_id: str):
    async def check():
        batch = await client.messages.batches.retrieve(batch_id)
        return batch if batch.processing_status == "ended" else None
    return await until(check)


async def results_of(client: anthropic.AsyncAnthropic, batch_id: str) -> dict[str, Any]:
    return {line.custom_id: line.result async for line in await client.messages.batches.results(batch_id)}


async def test_a_message_batch_answers_each_request_as_messages_would(simulator):
    client = anthropic_client(simulator)
    words = " ".join(["word"] * 30)
    batch = await client.messages.batches.create(requests=[
        message_request("plain", "hi [sim:tokens=3]"),
        message_request("cached", f"{words} [sim:cache_read=5] [sim:cache_write_1h=10] [sim:tokens=2]"),
        message_request("tiered", "hi [sim:served_tier=priority]")])
    assert batch.processing_status == "in_progress" and batch.id.startswith("msgbatch_") and batch.results_url is None
    assert batch.request_counts.processing == 3
    done = await batch_ended(client, batch.id)
    assert done.request_counts.model_dump() == {"processing": 0, "succeeded": 3, "errored": 0, "canceled": 0,
                                                "expired": 0}
    assert done.ended_at is not None and str(done.results_url).startswith(str(simulator.make_url("/v1/")))
    results = await results_of(client, batch.id)
    assert {r.type for r in results.values()} == {"succeeded"}
    plain, cached = results["plain"].message.usage, results["cached"].message.usage
    assert (plain.output_tokens, plain.service_tier) == (3, "batch")
    assert (cached.cache_read_input_tokens, cached.cache_creation.ephemeral_1h_input_tokens) == (5, 10)
    assert cached.input_tokens == (30 + 3 + 4) - 15
    assert results["tiered"].message.usage.service_tier == "priority"


async def test_requests_answered_with_an_error_are_errored_results(simulator):
    client = anthropic_client(simulator)
    batch = await client.messages.batches.create(requests=[
        message_request("ok", "hi"), message_request("busy", "hi [sim:status=529]"),
        {"custom_id": "invalid", "params": {"model": "claude-sim", "messages": said("hi")}}])
    done = await batch_ended(client, batch.id)
    assert (done.request_counts.succeeded, done.request_counts.errored) == (1, 2)
    results = await results_of(client, batch.id)
    assert results["busy"].type == "errored" and results["busy"].error.error.type == "overloaded_error"
    assert results["invalid"].error.error.type == "invalid_request_error"
    assert "max_tokens" in results["invalid"].error.error.message


async def test_a_held_message_batch_cancels_its_unfinished_requests(simulator, control):
    client = anthropic_client(simulator)
    await pause(control, True)
    batch = await client.messages.batches.create(requests=[message_request("a", "hi"), message_request("b", "hi")])
    assert (await sim_batches(control))["data"] == [{"id": batch.id, "api": "anthropic", "status": "in_progress",
                                                     "lines": 2, "created_at": int(batch.created_at.timestamp())}]
    with pytest.raises(anthropic.BadRequestError):
        await client.messages.batches.delete(batch.id)
    canceling = await client.messages.batches.cancel(batch.id)
    assert canceling.processing_status == "canceling" and canceling.cancel_initiated_at is not None
    done = await batch_ended(client, batch.id)
    assert (done.request_counts.canceled, done.request_counts.processing) == (2, 0)
    assert {r.type for r in (await results_of(client, batch.id)).values()} == {"canceled"}
    assert (await client.messages.batches.delete(batch.id)).type == "message_batch_deleted"
    with pytest.raises(anthropic.NotFoundError):
        await client.messages.batches.retrieve(batch.id)


async def test_message_batches_list_newest_first_in_pages(simulator):
    client = anthropic_client(simulator)
    created = [(await client.messages.batches.create(requests=[message_request("x", "hi")])).id for _ in range(3)]
    first = await client.messages.batches.list(limit=2)
    assert [b.id for b in first.data] == created[:0:-1] and first.has_more and first.last_id == created[1]
    older = await client.messages.batches.list(limit=2, after_id=created[1])
    assert [b.id for b in older.data] == created[:1] and not older.has_more
    newer = await client.messages.batches.list(limit=1, before_id=created[0])
    assert [b.id for b in newer.data] == created[1:2] and newer.has_more
    assert [b.id async for b in client.messages.batches.list(limit=2)] == created[::-1]


async def test_a_message_batch_needs_unique_well_formed_custom_ids(simulator):
    client = anthropic_client(simulator)
    with pytest.raises(anthropic.BadRequestError):
        await client.messages.batches.create(requests=[message_request("same", "a"), message_request("same", "b")])
    with pytest.raises(anthropic.BadRequestError):
        await client.messages.batches.create(requests=[message_request("not ok!", "a")])
    with pytest.raises(anthropic.BadRequestError):
        await client.messages.batches.create(requests=[])
