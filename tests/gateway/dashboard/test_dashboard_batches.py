"""GET /v1/dashboard/batches, the dashboard's list of an org's batches: both APIs' batches in one
list, newest first, each with its status, counts, exact cost, times and files; cursor pages; another
org's batches never shown nor usable as a cursor. On SQLite and on PostgreSQL."""

from decimal import Decimal

import pytest

from tests.gateway.batches.batch_support import (
    anthropic_sdk, chat_lines, ended, lines_recorded, message_batch_ended, openai_sdk, upload,
)
from tests.support import auth, decimal_json

PATH = "/v1/dashboard/batches"


@pytest.fixture(params=["sqlite", "postgresql"])
async def gateway(request, make_gateway, make_pg_gateway, config):
    return await (make_gateway if request.param == "sqlite" else make_pg_gateway)(config)


async def listed(gateway, key: str, query: str = "", status: int = 200) -> dict:
    response = await gateway.client.get(f"{PATH}{query}", headers=auth(key))
    assert response.status == status, await response.text()
    return decimal_json(await response.read())


async def test_both_apis_batches_newest_first_with_counts_cost_and_files(gateway, org):
    client = openai_sdk(gateway, org)
    openai_batch = await client.batches.create(input_file_id=await upload(client, chat_lines("gemini-2.5-flash", 2)),
                                               endpoint="/v1/chat/completions", completion_window="24h")
    done = await ended(client, openai_batch.id)
    messages = anthropic_sdk(gateway, org)
    message_batch = await messages.messages.batches.create(requests=[{"custom_id": "q", "params": {
        "model": "claude-haiku-4-5", "max_tokens": 20, "messages": [{"role": "user", "content": "hi"}]}}])
    await message_batch_ended(messages, message_batch.id)
    page = await listed(gateway, org["api_key"])
    assert [b["id"] for b in page["data"]] == [message_batch.id, openai_batch.id] and page["has_more"] is False
    newer, older = page["data"]
    charged = sum(e.charged_inr_nano for e in await lines_recorded(gateway, openai_batch.id))
    assert (older["api"], older["status"], older["model"], older["request_counts"]) == (
        "openai", "completed", "gemini-2.5-flash", {"total": 2, "completed": 2, "failed": 0})
    assert older["cost_inr"] == Decimal(charged) / 10**9 > 0
    assert (older["output_file_id"], older["error_file_id"]) == (done.output_file_id, None)
    assert older["created_at"] <= older["ended_at"] and older["created_at"] == done.created_at
    assert (newer["api"], newer["status"], newer["request_counts"]["completed"]) == ("anthropic", "completed", 1)
    assert newer["output_file_id"] is not None  # its results file, downloadable like any other
    content = await gateway.client.get(f"/v1/files/{newer['output_file_id']}/content", headers=auth(org["api_key"]))
    assert content.status == 200 and b'"custom_id":"q"' in (await content.read()).replace(b" ", b"")


async def test_pages_by_cursor_and_another_orgs_batches_stay_unseen(gateway, org):
    client = openai_sdk(gateway, org)
    made = []
    for _ in range(3):
        batch = await client.batches.create(input_file_id=await upload(client, chat_lines("gemini-2.5-flash", 1)),
                                            endpoint="/v1/chat/completions", completion_window="24h")
        made.insert(0, batch.id)
    first = await listed(gateway, org["api_key"], "?limit=2")
    assert [b["id"] for b in first["data"]] == made[:2] and first["next_cursor"] == made[1] and first["has_more"]
    second = await listed(gateway, org["api_key"], f"?limit=2&before={first['next_cursor']}")
    assert [b["id"] for b in second["data"]] == made[2:] and second["next_cursor"] is None
    other = await gateway.new_org("10")
    assert (await listed(gateway, other["api_key"]))["data"] == []
    refused = await listed(gateway, other["api_key"], f"?before={made[0]}", status=400)
    assert refused["error"]["param"] == "before"
    assert (await listed(gateway, org["api_key"], "?limit=0", status=400))["error"]["param"] == "limit"
