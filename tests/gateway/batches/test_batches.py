"""OpenAI's Batch API through the gateway, with the official openai SDK: a batch run by the gateway
itself (a provider without a batch API) and one sent to the provider's own (OpenAI's, at the
simulator), each line recorded once with its batch and custom_id and charged exactly its usage
at its price (regular, or the batch tier), the output and error files as OpenAI writes them."""

import json
from decimal import Decimal

import pytest

from gateway.edge.state import SERVICES
from ledger.events import BatchCreated, BatchEnded, CreditsHeld, HoldReleased
from ledger.money import to_nano
from tests.gateway.batches.batch_support import (
    chat_lines, ended, jsonl, lines_recorded, openai, openai_sdk, simulator_batches, upload,
)


def price(gateway, model: str, provider: str, batch: bool):
    catalogue = gateway.server.app[SERVICES].catalogue
    resolved = next(c for c in catalogue.candidates(model) if c.provider_id == provider)
    return resolved.prices.batched().per_token if batch else resolved.prices.per_token


def charge_of(event, priced, rate: Decimal) -> int:
    usd = event.prompt_tokens * Decimal(priced.prompt_usd) + event.completion_tokens * Decimal(priced.completion_usd)
    return to_nano(usd * rate)


@pytest.mark.parametrize(("model", "provider", "native"), [("gemini-2.5-flash", "google", False),
                                                             ("gpt-4o-mini", "openai", True)])
async def test_a_chat_batch_runs_and_each_line_is_charged_once(gateway, org, sim_url, model, provider, native):
    client = openai_sdk(gateway, org)
    file_id = await upload(client, chat_lines(model, 5))
    batch = await client.batches.create(input_file_id=file_id, endpoint="/v1/chat/completions",
                                        completion_window="24h", metadata={"job": "nightly"})
    assert batch.status == "in_progress" and batch.request_counts.total == 5 and batch.metadata == {"job": "nightly"}
    done = await ended(client, batch.id)
    assert done.status == "completed" and (done.request_counts.completed, done.request_counts.failed) == (5, 0)
    output = await jsonl(client, done.output_file_id)
    assert sorted(line["custom_id"] for line in output) == [f"line-{n}" for n in range(5)]
    assert done.error_file_id is None
    recorded = await lines_recorded(gateway, batch.id)
    assert sorted(e.custom_id for e in recorded) == [f"line-{n}" for n in range(5)]
    rate = gateway.server.app[SERVICES].config.billing.usd_to_inr
    for event in recorded:
        assert event.status == 200 and event.provider == provider
        assert event.charged_inr_nano == charge_of(event, price(gateway, model, provider, native), rate) > 0
        assert event.priced.tier == ("batch" if native else "standard")
    by_id = {e.custom_id: e for e in recorded}
    for line in output:
        body = line["response"]["body"]
        event = by_id[line["custom_id"]]
        assert line["response"]["status_code"] == 200 and line["response"]["request_id"] == event.request_id
        assert body["usage"]["prompt_tokens"] == event.prompt_tokens
        assert to_nano(Decimal(str(body["usage"]["cost_inr"]))) == event.cost_inr_nano
    assert done.cost_inr == pytest.approx(sum(e.charged_inr_nano for e in recorded) / 1e9)
    assert len([b for b in await simulator_batches(sim_url)]) == (1 if native else 0)


async def test_the_hold_covers_the_worst_case_and_its_rest_is_released(gateway, org):
    client = openai_sdk(gateway, org)
    file_id = await upload(client, chat_lines("gemini-2.5-flash", 3))
    batch = await client.batches.create(input_file_id=file_id, endpoint="/v1/chat/completions",
                                        completion_window="24h")
    await ended(client, batch.id)
    events = [r.event for r in await gateway.events()]
    [created] = [e for e in events if isinstance(e, BatchCreated)]
    [hold] = [e for e in events if isinstance(e, CreditsHeld) and e.hold_id == created.hold_id]
    [released] = [e for e in events if isinstance(e, HoldReleased) and e.hold_id == created.hold_id]
    drawn = sum(d.amount_inr_nano for e in await lines_recorded(gateway, batch.id) for d in e.draws)
    charged = sum(e.charged_inr_nano for e in await lines_recorded(gateway, batch.id))
    assert drawn == charged > 0 and hold.amount_inr_nano == drawn + released.amount_inr_nano
    assert [e.status for e in events if isinstance(e, BatchEnded)] == ["completed"]
    assert await gateway.balance(org["org_id"]) == Decimal(100) - Decimal(charged) / 10**9


async def test_a_bad_line_fails_the_batch_naming_it_and_nothing_is_held(gateway, org):
    client = openai_sdk(gateway, org)
    good = chat_lines("gemini-2.5-flash", 2)
    bad = json.dumps({"custom_id": "line-0", "method": "POST", "url": "/v1/chat/completions",
                      "body": {"model": "gemini-2.5-flash", "messages": []}}).encode() + b"\n"
    batch = await client.batches.create(input_file_id=await upload(client, good + bad + b"{not json\n"),
                                        endpoint="/v1/chat/completions", completion_window="24h")
    assert batch.status == "failed"
    found = {(e.line, e.code) for e in batch.errors.data}
    assert (3, "duplicate_custom_id") in found and (4, "invalid_json") in found
    assert not [e for e in (r.event for r in await gateway.events()) if isinstance(e, CreditsHeld)]


async def test_an_org_that_cannot_cover_the_worst_case_gets_402_and_no_batch(gateway):
    org = await gateway.new_org(credits_inr="0.000001")
    client = openai_sdk(gateway, org)
    file_id = await upload(client, chat_lines("gemini-2.5-flash", 3))
    with pytest.raises(openai.APIStatusError) as refused:
        await client.batches.create(input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h")
    assert refused.value.status_code == 402
    assert not [e for e in (r.event for r in await gateway.events()) if isinstance(e, BatchCreated)]
    assert (await client.batches.list()).data == []
