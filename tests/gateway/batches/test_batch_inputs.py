"""What a batch refuses, as a hostile or careless client sends it: each bad line named in the
failed batch's errors (nothing held, nothing sent), a file that is not the org's batch input a
400, another org's batch a 404, and a provider that lies in a line's result charged nothing."""

import json

import pytest

from ledger.events import CreditsHeld
from tests.gateway.batches.batch_support import (
    anthropic, anthropic_sdk, chat_lines, ended, jsonl, lines_recorded, openai, openai_sdk, upload,
)


def line(custom_id: str, body: dict, url: str = "/v1/chat/completions", method: str = "POST") -> bytes:
    return json.dumps({"custom_id": custom_id, "method": method, "url": url, "body": body}).encode() + b"\n"


def chat(model: str = "gemini-2.5-flash", **fields) -> dict:
    return {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 10, **fields}


@pytest.mark.parametrize(("bad", "code", "param"), [
    (line("x", chat("no-such-model")), "invalid_request_error", "model"),
    (line("x", chat("gpt-4o-mini")), "invalid_request_error", "model"),  # another model than the batch's
    (line("x", chat(), url="/v1/embeddings"), "mismatched_url", "url"),
    (line("x", chat(), method="GET"), "invalid_method", "method"),
    (line("x", chat(stream=True)), "invalid_request", "stream"),
    (line("x", {"model": "gemini-2.5-flash", "messages": "hi"}), "invalid_request", "messages"),
    (line("x", chat("text-embedding-3-small")), "invalid_request_error", "model"),
    (b'{"custom_id": "x", "method": "POST"\n', "invalid_json", ""),
    (b'["not", "an", "object"]\n', "invalid_request", ""),
])
async def test_a_bad_line_fails_the_batch_naming_it(gateway, org, bad, code, param):
    client = openai_sdk(gateway, org)
    data = line("first", chat()) + bad
    batch = await client.batches.create(input_file_id=await upload(client, data), endpoint="/v1/chat/completions",
                                        completion_window="24h")
    assert batch.status == "failed" and batch.failed_at is not None
    [error] = batch.errors.data
    assert (error.line, error.code, error.param or "") == (2, code, param)
    assert not [e for e in (r.event for r in await gateway.events()) if isinstance(e, CreditsHeld)]
    assert await lines_recorded(gateway, batch.id) == []


async def test_claude_lines_without_max_tokens_fail_as_the_single_route_does(gateway, org):
    client = openai_sdk(gateway, org)
    data = line("a", chat("claude-haiku-4-5")) + line("b", {**chat("claude-haiku-4-5"), "max_tokens": None})
    batch = await client.batches.create(input_file_id=await upload(client, data), endpoint="/v1/chat/completions",
                                        completion_window="24h")
    assert [(e.line, e.param) for e in batch.errors.data] == [(2, "max_tokens")]


async def test_a_model_the_key_may_not_use_fails_the_batch(gateway, org):
    from ledger.events import KeySpendLimitsSet
    from ledger.recorder import Append
    await gateway.ledger.writer.append(Append(org["org_id"], [KeySpendLimitsSet(key_id=org["key_id"],
                                                                                models=("gpt-4o-mini",))]))
    await gateway.ledger.follower.catch_up()
    client = openai_sdk(gateway, org)
    batch = await client.batches.create(input_file_id=await upload(client, line("a", chat())),
                                        endpoint="/v1/chat/completions", completion_window="24h")
    assert batch.status == "failed" and batch.errors.data[0].code == "model_not_allowed"


async def test_input_files_that_are_not_the_orgs_batch_input(gateway, org):
    client = openai_sdk(gateway, org)
    other = openai_sdk(gateway, await gateway.new_org())
    theirs = await upload(other, chat_lines("gemini-2.5-flash", 1))
    for file_id in (theirs, "file-nope"):
        with pytest.raises(openai.BadRequestError) as refused:
            await client.batches.create(input_file_id=file_id, endpoint="/v1/chat/completions",
                                        completion_window="24h")
        assert refused.value.body["param"] == "input_file_id"
    mine = await upload(client, chat_lines("gemini-2.5-flash", 1))
    await client.files.delete(mine)
    with pytest.raises(openai.BadRequestError):
        await client.batches.create(input_file_id=mine, endpoint="/v1/chat/completions", completion_window="24h")
    for endpoint, window in (("/v1/images", "24h"), ("/v1/chat/completions", "1h")):
        with pytest.raises(openai.BadRequestError):
            await client.batches.create(input_file_id=mine, endpoint=endpoint, completion_window=window)


async def test_another_orgs_batch_is_404(gateway, org):
    client = openai_sdk(gateway, org)
    batch = await client.batches.create(input_file_id=await upload(client, chat_lines("gemini-2.5-flash", 1)),
                                        endpoint="/v1/chat/completions", completion_window="24h")
    other = openai_sdk(gateway, await gateway.new_org())
    for call in (other.batches.retrieve(batch.id), other.batches.cancel(batch.id)):
        with pytest.raises(openai.NotFoundError):
            await call
    assert (await other.batches.list()).data == []
    with pytest.raises(anthropic.NotFoundError):  # an OpenAI batch is not a message batch
        await anthropic_sdk(gateway, org).messages.batches.retrieve(batch.id)


async def test_failed_lines_cost_nothing_and_land_in_the_error_file(gateway, org):
    client = openai_sdk(gateway, org)
    data = line("ok", chat()) + line("broken", chat(messages=[{"role": "user", "content": "[sim:status=503] x"}]))
    batch = await client.batches.create(input_file_id=await upload(client, data), endpoint="/v1/chat/completions",
                                        completion_window="24h")
    done = await ended(client, batch.id)
    assert (done.status, done.request_counts.completed, done.request_counts.failed) == ("completed", 1, 1)
    [failed] = await jsonl(client, done.error_file_id)
    assert failed["custom_id"] == "broken" and failed["response"]["status_code"] >= 500
    by_id = {e.custom_id: e for e in await lines_recorded(gateway, batch.id)}
    assert by_id["broken"].charged_inr_nano == 0 and by_id["ok"].charged_inr_nano > 0


async def test_a_native_line_with_a_lying_usage_report_is_charged_nothing(gateway, org):
    client = openai_sdk(gateway, org)
    lying = chat("gpt-4o-mini", messages=[{"role": "user", "content": "[sim:usage=negative] x"}])
    batch = await client.batches.create(input_file_id=await upload(client, line("ok", chat("gpt-4o-mini"))
                                                                   + line("liar", lying)),
                                        endpoint="/v1/chat/completions", completion_window="24h")
    done = await ended(client, batch.id)
    by_id = {e.custom_id: e for e in await lines_recorded(gateway, batch.id)}
    assert by_id["ok"].charged_inr_nano > 0 and set(by_id) == {"ok", "liar"}
    assert (by_id["liar"].charged_inr_nano, by_id["liar"].status) == (0, 502)
    assert done.status == "completed"


async def test_the_input_of_a_running_batch_cannot_be_deleted(gateway, org):
    client = openai_sdk(gateway, org)
    file_id = await upload(client, chat_lines("gemini-2.5-flash", 20, text="[sim:latency_ms=100] slow"))
    batch = await client.batches.create(input_file_id=file_id, endpoint="/v1/chat/completions",
                                        completion_window="24h")
    with pytest.raises(openai.ConflictError) as refused:
        await client.files.delete(file_id)
    assert refused.value.body["code"] == "file_in_use"
    await ended(client, batch.id)
    assert (await client.files.delete(file_id)).deleted


async def test_a_message_batch_with_a_bad_request_is_refused_whole(gateway, org):
    client = anthropic_sdk(gateway, org)
    good = {"custom_id": "a", "params": {"model": "claude-haiku-4-5", "max_tokens": 5,
                                         "messages": [{"role": "user", "content": "hi"}]}}
    for bad in ({**good, "custom_id": "no spaces allowed"}, good,
                {"custom_id": "b", "params": {"model": "claude-haiku-4-5", "messages": []}}):
        with pytest.raises(anthropic.BadRequestError) as refused:
            await client.messages.batches.create(requests=[good, bad])
        assert "requests[1]" in refused.value.message
    assert (await client.messages.batches.list()).data == []
