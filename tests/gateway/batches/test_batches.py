"""OpenAI's Batch API through the gateway, with the official openai SDK: a batch run by the gateway
itself (a provider without a batch API) and one sent to the provider's own (OpenAI's, at the
simulator), each line recorded once with its batch and custom_id and charged exactly its usage
at its price (regular, or the batch tier), the output and error files as OpenAI writes them."""

import io
import json
import time
from decimal import Decimal

import msgspec
import pytest

from gateway.accounts.directory import Principal
from gateway.batches import gateway_run, native
from gateway.services import Caller
from gateway.edge.state import SERVICES
from ledger import audit, batch_queries
from ledger.events import BatchCreated, BatchEnded, CreditsHeld, HoldReleased, KeySpendLimitsSet, RequestCompleted
from ledger.money import to_nano
from ledger.recorder import Append
from tests.support import PROVIDER_KEY
from tests.gateway.batches.batch_support import (
    anthropic, anthropic_sdk, chat_lines, ended, jsonl, lines_recorded, message_batch_ended, openai, openai_sdk,
    in_flight, pause_simulator, simulator_batches, until, upload,
)


def price(gateway, model: str, provider: str, batch: bool):
    catalogue = gateway.server.app[SERVICES].catalogue
    resolved = next(c for c in catalogue.candidates(model) if c.provider_id == provider)
    return resolved.prices.batched().per_token if batch else resolved.prices.per_token


def charge_of(event, priced, rate: Decimal) -> int:
    usd = event.prompt_tokens * Decimal(priced.prompt_usd) + event.completion_tokens * Decimal(priced.completion_usd)
    return to_nano(usd * rate)


@pytest.mark.parametrize(("model", "provider", "native"), [("gemini-2.5-flash", "google", False),
                                                             ("gpt-4o-mini", "openai", True),
                                                             ("claude-haiku-4-5", "anthropic", True)])
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
    assert len(await simulator_batches(sim_url)) == (1 if native else 0)


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


@pytest.mark.parametrize(("model", "provider", "native"), [("claude-haiku-4-5", "anthropic", True),
                                                             ("gemini-2.5-flash", "google", False),
                                                             ("gpt-4o-mini", "openai", False)])
async def test_a_message_batch_with_the_anthropic_sdk(gateway, org, sim_url, model, provider, native):
    client = anthropic_sdk(gateway, org)
    requests = [{"custom_id": f"q{n}", "params": {"model": model, "max_tokens": 20,
                                                   "messages": [{"role": "user", "content": f"hi {n}"}]}}
                for n in range(4)]
    batch = await client.messages.batches.create(requests=requests)
    assert batch.type == "message_batch" and batch.processing_status == "in_progress"
    assert batch.request_counts.processing == 4
    done = await message_batch_ended(client, batch.id)
    assert (done.request_counts.succeeded, done.request_counts.errored) == (4, 0)
    assert [b.id for b in (await client.messages.batches.list()).data] == [batch.id]
    results = {r.custom_id: r.result async for r in await client.messages.batches.results(batch.id)}
    assert sorted(results) == ["q0", "q1", "q2", "q3"] and {r.type for r in results.values()} == {"succeeded"}
    recorded = {e.custom_id: e for e in await lines_recorded(gateway, batch.id)}
    rate = gateway.server.app[SERVICES].config.billing.usd_to_inr
    for custom_id, result in results.items():
        event = recorded[custom_id]
        assert result.message.usage.input_tokens + (result.message.usage.cache_read_input_tokens or 0) \
            + (result.message.usage.cache_creation_input_tokens or 0) == event.prompt_tokens
        assert event.charged_inr_nano == charge_of(event, price(gateway, model, provider, native), rate) > 0
        assert event.route == "/v1/messages" and event.provider == provider
    assert len(await simulator_batches(sim_url)) == (1 if native else 0)


async def test_anthropic_errors_and_402_in_anthropic_shape(gateway):
    org = await gateway.new_org(credits_inr="0.000001")
    client = anthropic_sdk(gateway, org)
    requests = [{"custom_id": "a", "params": {"model": "claude-haiku-4-5", "max_tokens": 20,
                                              "messages": [{"role": "user", "content": "hi"}]}}]
    with pytest.raises(anthropic.APIStatusError) as refused:
        await client.messages.batches.create(requests=requests)
    assert refused.value.status_code == 402 and refused.value.body["type"] == "error"
    with pytest.raises(anthropic.NotFoundError):
        await client.messages.batches.retrieve("msgbatch_nope")


async def test_cancelling_charges_the_finished_lines_and_releases_the_rest(make_gateway, config, sim_url):
    config = in_flight(config, 2)
    gateway = await make_gateway(config)
    org = await gateway.new_org()
    client = openai_sdk(gateway, org)
    file_id = await upload(client, chat_lines("gemini-2.5-flash", 40, text="[sim:latency_ms=200] slow"))
    batch = await client.batches.create(input_file_id=file_id, endpoint="/v1/chat/completions",
                                        completion_window="24h")
    await until(lambda: lines_recorded(gateway, batch.id), lambda lines: len(lines) >= 2)
    cancelling = await client.batches.cancel(batch.id)
    assert cancelling.status in ("cancelling", "cancelled") and cancelling.cancelling_at is not None
    done = await ended(client, batch.id)
    recorded = await lines_recorded(gateway, batch.id)
    assert done.status == "cancelled" and 2 <= len(recorded) < 40
    errors = await jsonl(client, done.error_file_id)
    never = [line["custom_id"] for line in errors if line["error"]]
    assert {line["error"]["code"] for line in errors if line["error"]} == {"batch_cancelled"}
    output = await jsonl(client, done.output_file_id)
    assert sorted(never + [line["custom_id"] for line in output]) == sorted(f"line-{n}" for n in range(40))
    charged = sum(e.charged_inr_nano for e in recorded)
    assert await gateway.balance(org["org_id"]) == Decimal(100) - Decimal(charged) / 10**9
    assert (await client.batches.cancel(batch.id)).status == "cancelled"  # ended: stays as it is


async def test_a_native_batch_cancelled_upstream_and_the_expired_window(gateway, org, sim_url):
    await pause_simulator(sim_url, True)
    try:
        client = openai_sdk(gateway, org)
        file_id = await upload(client, chat_lines("gpt-4o-mini", 3))
        batch = await client.batches.create(input_file_id=file_id, endpoint="/v1/chat/completions",
                                            completion_window="24h")
        await until(lambda: simulator_batches(sim_url), lambda found: len(found) == 1)
        await client.batches.cancel(batch.id)
        done = await ended(client, batch.id)
    finally:
        await pause_simulator(sim_url, False)
    assert done.status == "cancelled" and await lines_recorded(gateway, batch.id) == []
    assert {line["error"]["code"] for line in await jsonl(client, done.error_file_id)} == {"batch_cancelled"}
    assert [b["status"] for b in await simulator_batches(sim_url)] == ["cancelled"]
    assert await gateway.balance(org["org_id"]) == Decimal(100)


async def test_a_key_budget_too_small_for_the_worst_case_is_402_at_creation(gateway, org):
    await gateway.ledger.writer.append(Append(org["org_id"], [KeySpendLimitsSet(
        key_id=org["key_id"], budget_inr_nano=100_000, budget_period="day")]))
    client = openai_sdk(gateway, org)
    file_id = await upload(client, chat_lines("gemini-2.5-flash", 3))
    await until(lambda: _refused(client, file_id), lambda status: status == 402)


async def _refused(client, file_id: str) -> int:
    try:
        await client.batches.create(input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h")
    except openai.APIStatusError as error:
        return error.status_code
    return 200


async def test_retention_none_keeps_the_answers_only_in_the_output_file(gateway):
    org = await gateway.new_org(retention="none")
    client = openai_sdk(gateway, org)
    batch = await client.batches.create(input_file_id=await upload(client, chat_lines("gemini-2.5-flash", 2)),
                                        endpoint="/v1/chat/completions", completion_window="24h")
    done = await ended(client, batch.id)
    assert len(await jsonl(client, done.output_file_id)) == 2
    recorder = gateway.server.app[SERVICES].recorder
    kept = await batch_queries.contents(recorder, [e.content_id for e in await lines_recorded(gateway, batch.id)])
    assert kept == {}


async def test_the_ledger_verifies_and_replays_with_batches(gateway, org):
    client = openai_sdk(gateway, org)
    for model in ("gemini-2.5-flash", "gpt-4o-mini"):
        batch = await client.batches.create(input_file_id=await upload(client, chat_lines(model, 3)),
                                            endpoint="/v1/chat/completions", completion_window="24h")
        await ended(client, batch.id)
    checked, problems = await audit.verify(gateway.server.app[SERVICES].recorder)
    assert problems == [] and checked > 0


def _lines(url: str, bodies: list[dict]) -> bytes:
    return b"".join(json.dumps({"custom_id": f"e{n}", "method": "POST", "url": url, "body": body}).encode() + b"\n"
                    for n, body in enumerate(bodies))


ENDPOINTS = [
    ("/v1/embeddings", [{"model": "text-embedding-3-small", "input": "one"},
                        {"model": "text-embedding-3-small", "input": ["two", "three"], "encoding_format": "base64"}],
     "openai", True),
    ("/v1/responses", [{"model": "gpt-4o-mini", "input": "hi", "max_output_tokens": 20}], "openai", True),
    ("/v1/responses", [{"model": "gemini-2.5-flash", "input": "hi", "max_output_tokens": 20}], "google", False),
    ("/v1/completions", [{"model": "gpt-3.5-turbo-instruct", "prompt": "once", "max_tokens": 10}], "openai", True),
]


@pytest.mark.parametrize(("url", "bodies", "provider", "native"), ENDPOINTS)
async def test_every_endpoint_runs_as_its_single_route_answers(gateway, org, url, bodies, provider, native):
    client = openai_sdk(gateway, org)
    batch = await client.batches.create(input_file_id=await upload(client, _lines(url, bodies)), endpoint=url,
                                        completion_window="24h")
    done = await ended(client, batch.id)
    assert (done.status, done.request_counts.completed) == ("completed", len(bodies)), done
    output = {line["custom_id"]: line["response"]["body"] for line in await jsonl(client, done.output_file_id)}
    recorded = {e.custom_id: e for e in await lines_recorded(gateway, batch.id)}
    for custom_id, body in output.items():
        event = recorded[custom_id]
        assert (event.provider, event.route, event.priced.tier) == (provider, url, "batch" if native else "standard")
        assert event.charged_inr_nano > 0 and "cost_inr" in json.dumps(body["usage"])
    if url == "/v1/embeddings":
        assert isinstance(output["e0"]["data"][0]["embedding"], list)
        assert isinstance(output["e1"]["data"][1]["embedding"], str)  # base64, as the line asked


class MovingClock:
    """The gateway's ledger clock: the wall clock, moved ahead when the test says."""

    def __init__(self) -> None:
        self.ahead_us = 0

    def __call__(self) -> int:
        return time.time_ns() // 1000 + self.ahead_us


async def test_a_batch_past_its_24_hours_expires_charging_what_ran(make_gateway, config, sim_url):
    clock = MovingClock()
    config = in_flight(config, 2)
    gateway = await make_gateway(config, clock=clock)
    org = await gateway.new_org()
    client = openai_sdk(gateway, org)
    slow = await client.batches.create(
        input_file_id=await upload(client, chat_lines("gemini-2.5-flash", 30, text="[sim:latency_ms=200] slow")),
        endpoint="/v1/chat/completions", completion_window="24h")
    await pause_simulator(sim_url, True)
    try:
        native = await client.batches.create(input_file_id=await upload(client, chat_lines("gpt-4o-mini", 3)),
                                             endpoint="/v1/chat/completions", completion_window="24h")
        await until(lambda: lines_recorded(gateway, slow.id), lambda lines: len(lines) >= 2)
        await until(lambda: simulator_batches(sim_url), lambda found: len(found) == 1)
        clock.ahead_us = 25 * 3600 * 1_000_000
        done, gone = await ended(client, slow.id), await ended(client, native.id)
    finally:
        await pause_simulator(sim_url, False)
    assert (done.status, gone.status) == ("expired", "expired") and done.expired_at is not None
    recorded = await lines_recorded(gateway, slow.id)
    assert 2 <= len(recorded) < 30
    unrun = [line for line in await jsonl(client, done.error_file_id) if line["error"]]
    assert {line["error"]["code"] for line in unrun} == {"batch_expired"} and len(unrun) == 30 - len(recorded)
    charged = sum(e.charged_inr_nano for e in recorded)
    assert await gateway.balance(org["org_id"]) == Decimal(100) - Decimal(charged) / 10**9


async def test_an_upstream_batch_created_before_a_crash_is_found_again(gateway, org, sim_url):
    """A runner that finds no upstream batch recorded asks the provider first: the one a killed
    process created (marked with the gateway's batch id) is taken, not created twice."""
    upstream = openai.AsyncOpenAI(base_url=f"{sim_url}/v1", api_key=PROVIDER_KEY, max_retries=0)
    uploaded = await upstream.files.create(file=("in.jsonl", io.BytesIO(chat_lines("gpt-4o-mini", 2))),
                                           purpose="batch")
    before = await upstream.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions",
                                           completion_window="24h", metadata={"gateway_batch_id": "batch_lost"})
    services = gateway.server.app[SERVICES]
    row = msgspec.structs.replace(await _any_row(gateway, org), batch_id="batch_lost", upstream_id="",
                                  created_at_us=services.recorder.clock() - 60_000_000)
    model = services.catalogue.resolve("gpt-4o-mini")
    found = native.Upstream(services, row, services.providers.batch["openai"], "", model)
    assert await found.submitted() == before.id
    assert len(await simulator_batches(sim_url)) == 2  # the gateway's own batch, and the one found: none new


async def _any_row(gateway, org):
    client = openai_sdk(gateway, org)
    batch = await client.batches.create(input_file_id=await upload(client, chat_lines("gpt-4o-mini", 1)),
                                        endpoint="/v1/chat/completions", completion_window="24h")
    await ended(client, batch.id)
    return await batch_queries.batch(gateway.server.app[SERVICES].recorder, org["org_id"], batch.id)


async def test_a_shutdown_mid_batch_records_no_line_it_stopped(make_gateway, config):
    """Lines a stopping runner cancels are not recorded (a single request's would be a 499): the next
    gateway runs them, and every line ends recorded once, answered."""
    clock = MovingClock()
    config = in_flight(config, 4)
    first = await make_gateway(config, clock=clock)
    org = await first.new_org()
    client = openai_sdk(first, org)
    batch = await client.batches.create(
        input_file_id=await upload(client, chat_lines("gemini-2.5-flash", 40, text="[sim:latency_ms=300] slow")),
        endpoint="/v1/chat/completions", completion_window="24h")
    await until(lambda: lines_recorded(first, batch.id), lambda lines: len(lines) >= 6)
    await first.server.close()
    second = await make_gateway(config, clock=clock)
    done = await ended(openai_sdk(second, org), batch.id)
    recorded = await lines_recorded(second, batch.id)
    assert done.status == "completed" and sorted(e.custom_id for e in recorded) == sorted(
        f"line-{n}" for n in range(40))
    assert {e.status for e in recorded} == {200}


async def test_a_stopped_line_that_held_on_its_own_releases_its_hold_unrecorded(gateway, org):
    """The fallback path (a batch whose hold lapsed, its lines holding on their own): a line the
    runner stops gives its hold back and leaves no record, so the next runner sends it again."""
    services = gateway.server.app[SERVICES]
    caller = Caller(Principal(key_id=org["key_id"], org_id=org["org_id"]), "req_line_stopped",
                    batch_id="batch_x", custom_id="c")
    hold = CreditsHeld(hold_id="hold_line_stopped", request_id=caller.request_id, amount_inr_nano=5_000,
                       key_id=org["key_id"], lease_us=60_000_000)
    await services.writer.append(Append(org["org_id"], [hold]))
    caller.holds.append(hold)
    gateway_run.unrun(services, caller)
    await services.releases.settled()
    events = [r.event for r in await gateway.events()]
    assert [e.amount_inr_nano for e in events if isinstance(e, HoldReleased) and e.hold_id == hold.hold_id] == [5_000]
    assert not [e for e in events if isinstance(e, RequestCompleted)] and caller.holds == []


async def test_the_request_log_names_each_lines_batch_and_custom_id(gateway, org):
    client = openai_sdk(gateway, org)
    batch = await client.batches.create(input_file_id=await upload(client, chat_lines("gemini-2.5-flash", 2)),
                                        endpoint="/v1/chat/completions", completion_window="24h")
    await ended(client, batch.id)
    logged = await (await gateway.client.get("/v1/logs", headers={"Authorization": f"Bearer {org['api_key']}"})).json()
    lines = [e for e in logged["data"] if e["batch_id"] == batch.id]
    assert sorted(e["custom_id"] for e in lines) == ["line-0", "line-1"]
    assert all(e["status"] == 200 and e["price_tier"] == "standard" for e in lines)
