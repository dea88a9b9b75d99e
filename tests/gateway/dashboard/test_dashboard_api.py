"""The JSON API behind the dashboard: /v1/usage, /v1/logs, /v1/keys, /v1/music/{id}/link."""

import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from gateway.accounts import admin
from gateway.edge.state import SERVICES
from tests.support import auth, chat_body, decimal_json, post_chat
from sweeper.sweep import Sweeper

RATE = Decimal("84.0")


@pytest.fixture(params=["sqlite", "postgresql"])
async def gateway(request, make_gateway, make_pg_gateway, config):
    """Every test here runs on the embedded SQLite ledger and on PostgreSQL."""
    return await (make_gateway if request.param == "sqlite" else make_pg_gateway)(config)


async def get_json(gateway, path: str, key: str, status: int = 200) -> dict:
    response = await gateway.client.get(path, headers=auth(key))
    assert response.status == status, await response.text()
    return decimal_json(await response.read())


async def chat(gateway, org: dict, text: str = "hello there", **extra) -> dict:
    response = await post_chat(gateway, org, chat_body(text, **extra))
    body = decimal_json(await response.read())
    return {**body, "status": response.status, "id": response.headers["X-Request-Id"]}


async def requests_made(gateway, org: dict, count: int) -> list[str]:
    """`count` successful chat requests; their ids, oldest first."""
    return [(await chat(gateway, org, f"question {n}"))["id"] for n in range(count)]


# -- usage ------------------------------------------------------------------------------------------

async def test_usage_reports_the_exact_balance_daily_spend_models_and_error_rate(gateway, org):
    replies = [await chat(gateway, org, "one [sim:tokens=5]"), await chat(gateway, org, "two [sim:tokens=7]"),
               await chat(gateway, org, "three", model="claude-haiku-4-5", max_tokens=20)]
    failed = await chat(gateway, org, "boom [sim:status=500]")
    assert [r["status"] for r in replies] == [200, 200, 200] and failed["status"] == 502
    spent = sum(r["usage"]["cost_inr"] for r in replies)
    body = await get_json(gateway, "/v1/usage", org["api_key"])
    assert body["balance_inr"] == Decimal(100) - spent == await gateway.balance(org["org_id"])
    assert (body["credits_inr"], body["spent_inr"], body["usd_to_inr"]) == (100, spent, RATE)
    assert body["totals"]["requests"] == 4 and body["totals"]["errors"] == 1
    assert body["totals"]["error_rate"] == Decimal("0.25") and body["totals"]["spend_inr"] == spent
    assert len(body["daily"]) == 30 and body["daily"][-1]["date"] == datetime.now(UTC).date().isoformat()
    assert body["daily"][-1]["spend_inr"] == spent and sum(d["requests"] for d in body["daily"]) == 4
    by_model = {m["model"]: m for m in body["by_model"]}
    assert by_model["gpt-4o-mini"]["requests"] == 3 and by_model["gpt-4o-mini"]["errors"] == 1
    assert by_model["claude-haiku-4-5"]["spend_inr"] == replies[2]["usage"]["cost_inr"]
    assert body["statuses"] == [200, 502] and body["routes"] == ["/v1/chat/completions"]
    assert body["models"] == ["claude-haiku-4-5", "gpt-4o-mini"]


async def test_usage_is_the_callers_org_only_and_days_is_bounded(gateway, org):
    await chat(gateway, org)
    other = await gateway.new_org("7")
    body = await get_json(gateway, "/v1/usage?days=7", other["api_key"])
    assert body["org_id"] == other["org_id"] and body["balance_inr"] == 7
    assert body["totals"]["requests"] == 0 and len(body["daily"]) == 7 and body["by_model"] == []
    for days in ("0", "91", "x", "-1"):
        error = await get_json(gateway, f"/v1/usage?days={days}", org["api_key"], 400)
        assert error["error"]["param"] == "days"


async def test_usage_needs_a_key(gateway):
    assert (await gateway.client.get("/v1/usage")).status == 401


# -- the request log --------------------------------------------------------------------------------

async def test_log_lists_requests_newest_first_with_exact_costs_and_rate(gateway, org):
    reply = await chat(gateway, org, "cost me [sim:tokens=9]")
    body = await get_json(gateway, "/v1/logs", org["api_key"])
    [entry] = body["data"]
    assert body["has_more"] is False and body["next_cursor"] is None
    assert entry["id"] == reply["id"] and entry["log_id"].startswith("log_")
    assert (entry["route"], entry["model"], entry["provider"], entry["status"]) == (
        "/v1/chat/completions", "gpt-4o-mini", "openai", 200)
    assert entry["usage"]["completion_tokens"] == reply["usage"]["completion_tokens"] == 9
    assert entry["cost_usd"] == reply["usage"]["cost_usd_total"]
    assert entry["cost_inr"] == entry["charged_inr"] == reply["usage"]["cost_inr"]
    assert entry["usd_to_inr"] == RATE and entry["error"] is None and entry["latency_ms"] >= 0
    assert abs(entry["created"] - time.time()) < 60 and entry["created_at"].endswith("Z")


async def test_log_pages_by_cursor_without_gaps_or_repeats(gateway, org):
    made = await requests_made(gateway, org, 7)
    seen, cursor = [], None
    for _ in range(4):
        query = "/v1/logs?limit=3" + (f"&before={cursor}" if cursor else "")
        body = await get_json(gateway, query, org["api_key"])
        seen.append([e["id"] for e in body["data"]])
        cursor = body["next_cursor"]
        if not body["has_more"]:
            break
    assert seen == [made[6:3:-1], made[3:0:-1], made[0:1]] and cursor is None


async def test_log_filters_by_route_model_and_status_and_combines_them(gateway, org):
    ok = await chat(gateway, org)
    claude = await chat(gateway, org, "hi", model="claude-haiku-4-5", max_tokens=20)
    failed = await chat(gateway, org, "boom [sim:status=500]")
    speech = await gateway.client.post("/v1/audio/speech", headers=auth(org["api_key"]),
                                       json={"model": "tts-1", "input": "hello", "voice": "alloy"})
    assert speech.status == 200
    await speech.read()
    ids = lambda body: [e["id"] for e in body["data"]]  # noqa: E731
    key = org["api_key"]
    assert ids(await get_json(gateway, "/v1/logs?model=claude-haiku-4-5", key)) == [claude["id"]]
    assert ids(await get_json(gateway, "/v1/logs?status=502", key)) == [failed["id"]]
    assert len(ids(await get_json(gateway, "/v1/logs?route=/v1/audio/speech", key))) == 1
    assert ids(await get_json(gateway, "/v1/logs?route=/v1/chat/completions&model=gpt-4o-mini&status=200",
                              key)) == [ok["id"]]
    assert ids(await get_json(gateway, "/v1/logs?model=no-such-model", key)) == []


@pytest.mark.parametrize(("query", "param"), [
    ("limit=0", "limit"), ("limit=201", "limit"), ("limit=ten", "limit"), ("before=123", "before"),
    ("before=log_x", "before"), ("status=abc", "status"), ("status=42", "status"), ("modle=x", "modle"),
])
async def test_log_refuses_bad_queries_naming_the_parameter(gateway, org, query, param):
    error = await get_json(gateway, f"/v1/logs?{query}", org["api_key"], 400)
    assert error["error"]["param"] == param and param in error["error"]["message"]


async def test_log_shows_nothing_of_another_org(gateway, org):
    reply = await chat(gateway, org)
    other = await gateway.new_org("5")
    await chat(gateway, other)
    listed = await get_json(gateway, "/v1/logs", other["api_key"])
    assert reply["id"] not in [e["id"] for e in listed["data"]] and len(listed["data"]) == 1
    mine = await get_json(gateway, f"/v1/logs/{reply['id']}", org["api_key"])
    for ident in (reply["id"], mine["log_id"]):
        error = await get_json(gateway, f"/v1/logs/{ident}", other["api_key"], 404)
        assert error["error"]["type"] == "not_found"


async def test_log_detail_holds_the_prompt_and_response_until_text_is_removed(gateway, org):
    reply = await chat(gateway, org, "<script>alert(1)</script> [sim:tokens=4]")
    detail = await get_json(gateway, f"/v1/logs/{reply['id']}", org["api_key"])
    assert detail["content_state"] == "kept"
    assert detail["content"]["request"] == [{"role": "user", "content": "<script>alert(1)</script> [sim:tokens=4]"}]
    assert detail["content"]["response"] == [reply["choices"][0]["message"]["content"]]
    by_log_id = await get_json(gateway, f"/v1/logs/{detail['log_id']}", org["api_key"])
    assert by_log_id == detail
    now_us = time.time_ns() // 1000
    assert await gateway.ledger.recorder.remove_text(now_us + 1, now_us) == 1
    removed = await get_json(gateway, f"/v1/logs/{reply['id']}", org["api_key"])
    assert removed["content"] is None and removed["content_state"] == "removed"
    assert removed["cost_inr"] == reply["usage"]["cost_inr"]  # the bill stays


async def test_log_detail_says_when_no_text_was_retained(gateway):
    org = await gateway.new_org("10", retention="none")
    reply = await chat(gateway, org)
    detail = await get_json(gateway, f"/v1/logs/{reply['id']}", org["api_key"])
    assert detail["content"] is None and detail["content_state"] == "not_retained"
    assert (await get_json(gateway, "/v1/logs/req_nothing", org["api_key"], 404))["error"]["type"] == "not_found"


async def test_a_music_request_shows_its_prompt_and_lyrics_and_shares_its_log_id_with_history(hosted, hosted_org):
    key = hosted_org["api_key"]
    made = await hosted.client.post("/v1/music", headers=auth(key), json={
        "model": "tune-3-clip-preview", "prompt": "<b>rain</b>", "lyrics": "[Verse] la"})
    track = await made.json()
    detail = await get_json(hosted, f"/v1/logs/{track['id']}", key)
    assert detail["content_state"] == "kept" and detail["route"] == "/v1/music"
    assert detail["content"] == {"request": {"prompt": "<b>rain</b>", "lyrics": "[Verse] la", "instrumental": False},
                                 "response": track["text"]}
    [item] = (await get_json(hosted, "/v1/music", key))["data"]
    assert item["log_id"] == detail["log_id"]
    download = await hosted.client.get(f"/v1/music/{detail['log_id']}/content", headers=auth(key),
                                       allow_redirects=False)
    assert download.status == 302


async def test_a_request_that_failed_before_pricing_has_no_rate(gateway, org):
    failed = await chat(gateway, org, "boom [sim:status=500]")
    ok = await chat(gateway, org)
    entries = {e["id"]: e for e in (await get_json(gateway, "/v1/logs", org["api_key"]))["data"]}
    assert entries[failed["id"]]["usd_to_inr"] is None and entries[failed["id"]]["charged_inr"] == 0
    assert entries[ok["id"]]["usd_to_inr"] == RATE and b'"usd_to_inr":84,' in (
        await (await gateway.client.get("/v1/logs", headers=auth(org["api_key"]))).read())


# -- keys -------------------------------------------------------------------------------------------

async def test_keys_list_the_orgs_keys_with_their_last_use(gateway, org):
    before = await get_json(gateway, "/v1/keys", org["api_key"])
    [mine] = before["data"]
    assert (mine["id"], mine["admin"], mine["last_used"], mine["revoked"]) == (org["key_id"], True, None, None)
    assert mine["prefix"] == org["api_key"][:10] and org["api_key"] not in str(before)
    assert before["can_manage"] is True and before["current_key_id"] == org["key_id"]
    await chat(gateway, org)
    [used] = (await get_json(gateway, "/v1/keys", org["api_key"]))["data"]
    assert abs(used["last_used"] - time.time()) < 60


async def test_an_admin_key_creates_a_key_that_works_at_once_and_revokes_it(gateway, org):
    response = await gateway.client.post("/v1/keys", json={"name": "ci runner"}, headers=auth(org["api_key"]))
    assert response.status == 201, await response.text()
    created = await response.json()
    assert created["api_key"].startswith("gwk_") and created["name"] == "ci runner" and created["admin"] is False
    assert (await chat(gateway, {"api_key": created["api_key"]}))["status"] == 200
    listed = (await get_json(gateway, "/v1/keys", created["api_key"]))
    assert [k["id"] for k in listed["data"]] == [created["id"], org["key_id"]] and listed["can_manage"] is False
    assert created["api_key"] not in str(listed)
    revoked = await gateway.client.delete(f"/v1/keys/{created['id']}", headers=auth(org["api_key"]))
    assert revoked.status == 200 and (await revoked.json())["revoked"] is True
    assert (await gateway.client.get("/v1/keys", headers=auth(created["api_key"]))).status == 401
    again = await gateway.client.delete(f"/v1/keys/{created['id']}", headers=auth(org["api_key"]))
    assert again.status == 200  # idempotent
    [entry] = [k for k in (await get_json(gateway, "/v1/keys", org["api_key"]))["data"] if k["id"] == created["id"]]
    assert entry["revoked"] is not None


async def test_only_admin_keys_manage_keys_and_never_another_orgs_or_their_own(gateway, org):
    plain = await admin.create_key(gateway.ledger.recorder, org["org_id"], name="plain")
    await gateway.ledger.follower.catch_up()
    denied = await gateway.client.post("/v1/keys", json={}, headers=auth(plain["api_key"]))
    assert denied.status == 403 and (await denied.json())["error"]["type"] == "permission_denied"
    denied = await gateway.client.delete(f"/v1/keys/{org['key_id']}", headers=auth(plain["api_key"]))
    assert denied.status == 403
    own = await gateway.client.delete(f"/v1/keys/{org['key_id']}", headers=auth(org["api_key"]))
    assert own.status == 409
    other = await gateway.new_org("1")
    foreign = await gateway.client.delete(f"/v1/keys/{other['key_id']}", headers=auth(org["api_key"]))
    assert foreign.status == 404
    assert (await chat(gateway, other))["status"] == 200  # still works


@pytest.mark.parametrize(("body", "param"), [({"name": "x" * 101}, "name"), ({"admin": "yes"}, "admin"),
                                             ({"nmae": "typo"}, "nmae")])
async def test_key_creation_refuses_bad_bodies(gateway, org, body, param):
    response = await gateway.client.post("/v1/keys", json=body, headers=auth(org["api_key"]))
    assert response.status == 400
    assert (await response.json())["error"]["param"] == param


# -- music links ------------------------------------------------------------------------------------

async def test_music_link_is_a_signed_range_capable_path_until_the_track_expires(hosted, hosted_org):
    key = hosted_org["api_key"]
    made = await hosted.client.post("/v1/music", json={"model": "tune-3-clip-preview", "prompt": "rain"},
                                    headers=auth(key))
    track_id = (await made.json())["id"]
    link = await get_json(hosted, f"/v1/music/{track_id}/link", key)
    assert link["url"].startswith("/media/") and link["expires_at"] > time.time()
    partial = await hosted.client.get(link["url"], headers={"Range": "bytes=100-199"})
    assert partial.status == 206 and len(await partial.read()) == 100
    other = await hosted.new_org("5")
    assert (await hosted.client.get(f"/v1/music/{track_id}/link", headers=auth(other["api_key"]))).status == 404
    store = hosted.server.app[SERVICES].store
    await Sweeper(hosted.ledger.recorder, store, 30, 0).run_pass(datetime.now(UTC) + timedelta(days=31))
    gone = await hosted.client.get(f"/v1/music/{track_id}/link", headers=auth(key))
    assert gone.status == 410 and (await gone.json())["error"]["type"] == "gone"


# -- the page ---------------------------------------------------------------------------------------

async def test_dashboard_page_is_served_without_a_key_under_a_strict_policy(gateway):
    page = await gateway.client.get("/dashboard")
    assert page.status == 200 and page.content_type == "text/html"
    policy = page.headers["Content-Security-Policy"]
    assert "default-src 'none'" in policy and "script-src 'self'" in policy and "unsafe" not in policy
    assert page.headers["X-Content-Type-Options"] == "nosniff" and page.headers["X-Frame-Options"] == "DENY"
    html = await page.text()
    assert "<script>" not in html and "http://" not in html and "https://" not in html
    script = await gateway.client.get("/dashboard/static/app.js")
    assert script.status == 200 and script.content_type == "text/javascript"
    assert script.headers["Content-Security-Policy"] == policy


@pytest.mark.parametrize("name", ["nothing.js", "..%2Fpage.py", "%2E%2E%2Fpage.py", ".hidden.js",
                                  "app.py"])
async def test_dashboard_serves_only_its_own_files(gateway, name):
    response = await gateway.client.get(f"/dashboard/static/{name}")
    assert response.status == 404


# -- what keeps the log fast at any size ------------------------------------------------------------

@pytest.mark.parametrize("query", [
    {}, {"before": "log_900"}, {"route": "/v1/embeddings"}, {"model": "gpt-4o", "before": "log_5"},
    {"status": "502"}, {"route": "/v1/chat/completions", "model": "gpt-4o", "status": "200"},
])
async def test_every_log_page_is_an_index_range_read_in_position_order(make_gateway, config, query):
    """No page scans the log or sorts it: SQLite walks one index backwards from the cursor."""
    from gateway.dashboard.request_log import page_sql, parse_query

    gateway = await make_gateway(config)

    sql, params = page_sql("org_x", parse_query(query))
    plan = " | ".join(row[-1] for row in await gateway.ledger.recorder._fetch(f"EXPLAIN QUERY PLAN {sql}", params))
    assert "USING INDEX request_log_by_" in plan and "TEMP B-TREE" not in plan and "SCAN" not in plan, plan
