"""Batch alerts from outside (issue 39): an admin key subscribes an endpoint at a real receiver to
batch.completed, batch.failed and batch.cancelled; a batch the gateway runs ends and the receiver
gets batch.completed, signed, with the batch's counts, cost and files as GET /v1/batches shows
them; a batch failing validation arrives as batch.failed naming its bad lines; one cancelled while
its slow lines run arrives as batch.cancelled with the lines it never ran counted out."""

import json
from decimal import Decimal

import msgspec
import pytest

from gateway.config import WebhooksConfig
from tests.gateway.batches.batch_support import chat_lines, ended, openai_sdk, upload
from tests.gateway.webhooks.receiver import Receiver
from tests.support import auth

BATCH_ALERTS = ["batch.completed", "batch.failed", "batch.expired", "batch.cancelled"]


@pytest.fixture
async def hooked(make_gateway, config):
    hooks = WebhooksConfig(allowed_hosts=["127.0.0.1"], allow_http=True, poll_interval_s=0.05, retry_first_s=0.05)
    # Two lines at a time: a batch of slow lines is still running when the test cancels it.
    batches = msgspec.structs.replace(config.batches, concurrency=2)
    return await make_gateway(msgspec.structs.replace(config, webhooks=hooks, batches=batches))


async def subscribe(gateway, org: dict, receiver: Receiver, events: list[str]) -> dict:
    response = await gateway.client.post("/v1/webhooks", json={"url": receiver.url, "events": events},
                                         headers=auth(org["api_key"]))
    assert response.status == 201, await response.text()
    created = await response.json()
    receiver.secret = created["secret"]
    return created


async def test_a_finished_batch_is_announced_as_batch_completed(hooked, receiver):
    org = await hooked.new_org("100")
    created = await subscribe(hooked, org, receiver, BATCH_ALERTS)
    assert created["events"] == BATCH_ALERTS
    client = openai_sdk(hooked, org)
    batch = await client.batches.create(input_file_id=await upload(client, chat_lines("gemini-2.5-flash", 3)),
                                        endpoint="/v1/chat/completions", completion_window="24h")
    done = await ended(client, batch.id)
    await receiver.until(lambda r: r.of_type("batch.completed"))
    [got] = receiver.got
    assert got["signed"] and got["body"]["type"] == "batch.completed"
    data = got["body"]["data"]
    assert (data["org_id"], data["batch_id"], data["status"], data["api"], data["model"]) == (
        org["org_id"], batch.id, "completed", "openai", "gemini-2.5-flash")
    assert data["request_counts"] == {"total": 3, "completed": 3, "failed": 0}
    assert Decimal(data["cost_inr"]) == Decimal(str(done.cost_inr)) > 0
    assert (data["output_file_id"], data["error_file_id"], data["errors"]) == (done.output_file_id, None, [])
    assert data["ended_at"] == got["body"]["created_at"]


async def test_a_batch_failing_validation_is_announced_as_batch_failed(hooked, receiver):
    org = await hooked.new_org("100")
    await subscribe(hooked, org, receiver, ["batch.completed", "batch.failed"])
    client = openai_sdk(hooked, org)
    bad = chat_lines("gemini-2.5-flash", 1) + b"{not json\n"
    batch = await client.batches.create(input_file_id=await upload(client, bad), endpoint="/v1/chat/completions",
                                        completion_window="24h")
    assert batch.status == "failed"
    await receiver.until(lambda r: r.of_type("batch.failed"))
    [data] = [body["data"] for body in receiver.of_type("batch.failed")]
    assert (data["batch_id"], data["status"], data["output_file_id"], data["cost_inr"]) == (
        batch.id, "failed", None, "0")
    assert [(e["line"], e["code"]) for e in data["errors"]] == [(2, "invalid_json")] and data["error_count"] == 1
    assert [got["body"]["type"] for got in receiver.got] == ["batch.failed"]


async def test_a_cancelled_batch_is_announced_as_batch_cancelled(hooked, receiver):
    org = await hooked.new_org("100")
    await subscribe(hooked, org, receiver, ["batch.cancelled"])
    client = openai_sdk(hooked, org)
    slow = chat_lines("gemini-2.5-flash", 8, text="[sim:latency_ms=1000] hello")
    batch = await client.batches.create(input_file_id=await upload(client, slow), endpoint="/v1/chat/completions",
                                        completion_window="24h")
    assert (await client.batches.cancel(batch.id)).status in ("cancelling", "cancelled")
    done = await ended(client, batch.id)
    assert done.status == "cancelled"
    await receiver.until(lambda r: r.of_type("batch.cancelled"))
    [data] = [body["data"] for body in receiver.of_type("batch.cancelled")]
    counts = data["request_counts"]
    assert data["batch_id"] == batch.id and counts["total"] == 8 and counts["completed"] + counts["failed"] < 8
    assert (counts["completed"], counts["failed"]) == (done.request_counts.completed, done.request_counts.failed)
    assert data["error_file_id"] == done.error_file_id is not None  # the lines never run are written there
    errors = [json.loads(line) for line in (await client.files.content(done.error_file_id)).content.splitlines()]
    assert len(errors) == 8 - counts["completed"]  # the lines that failed, and those never run


async def test_batch_alert_names_are_accepted_and_others_still_refused(hooked):
    org = await hooked.new_org("100")
    for events, status in (([*BATCH_ALERTS, "webhook.test"], 201), (["batch.started"], 400)):
        response = await hooked.client.post("/v1/webhooks", json={"url": "http://127.0.0.1:9/hook", "events": events},
                                            headers=auth(org["api_key"]))
        assert response.status == status, await response.text()
