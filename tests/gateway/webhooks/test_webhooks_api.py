"""Webhooks from outside (issue 29): an org's admin key registers an endpoint at a real receiver
through /v1/webhooks, the receiver gets each alert the org's ledger raises, signed (checked by the
receiver on its own), in ledger order, once per id even when it failed and was retried; an endpoint
that keeps failing is disabled and says why; and bad input, other orgs' ids, non-admin keys and
destinations inside the operator's network are refused with a 4xx naming the problem."""

import asyncio
import base64
import sqlite3
import time
from pathlib import Path

import msgspec
import pytest

from gateway.accounts import admin
from gateway.config import WebhooksConfig
from ledger.events import KeySpendLimitsSet, RequestCompleted
from ledger.recorder import Append
from tests.gateway.webhooks.receiver import Receiver
from tests.support import auth, chat_body, poll

HOOKS = "/v1/webhooks"
INR = 1_000_000_000
EVERY = ["balance.low", "key.budget", "key.expiring", "credits.added", "request.refused", "webhook.test"]


def hooks_config(config, **changes):
    settings = {"allowed_hosts": ["127.0.0.1"], "allow_http": True, "poll_interval_s": 0.05,
                "retry_first_s": 0.05, **changes}
    return msgspec.structs.replace(config, webhooks=WebhooksConfig(**settings))


@pytest.fixture
async def hooked(make_gateway, config):
    return await make_gateway(hooks_config(config))


async def register(gateway, key: str, receiver: Receiver, **fields) -> dict:
    body = {"url": receiver.url, "events": EVERY, "balance_low_inr": "99.99", **fields}
    response = await gateway.client.post(HOOKS, json=body, headers=auth(key))
    assert response.status == 201, await response.text()
    created = await response.json()
    receiver.secret = created["secret"]
    return created


async def charge(gateway, org_id: str, key_id: str, request_id: str, inr: int) -> None:
    await gateway.ledger.writer.append(Append(org_id, [RequestCompleted(
        request_id=request_id, key_id=key_id, route="/v1/chat/completions", model="gpt-4o-mini", provider="openai",
        status=200, charged_inr_nano=inr * INR, cost_inr_nano=inr * INR)]))


async def test_an_endpoint_gets_each_alert_signed_in_ledger_order(hooked, receiver):
    org = await hooked.new_org("100")
    created = await register(hooked, org["api_key"], receiver, key_budget_percent=[50, 100])
    assert created["id"].startswith("wh_") and len(base64.b64decode(created["secret"][6:])) >= 24
    assert (created["events"], created["key_budget_percent"], created["key_expiring_hours"],
            created["balance_low_inr"], created["enabled"]) == (EVERY, [50, 100], 24, 99.99, True)
    await hooked.ledger.writer.append(Append(org["org_id"], [KeySpendLimitsSet(key_id=org["key_id"],
                                                                               budget_inr_nano=2 * INR)]))
    await admin.add_credits(hooked.ledger.recorder, org["org_id"], "5")
    await charge(hooked, org["org_id"], org["key_id"], "r1", 1)  # 105 -> 104: 50% of the budget
    await charge(hooked, org["org_id"], org["key_id"], "r2", 5)  # 104 -> 99: below 99.99; 300% of it
    tested = await hooked.client.post(f"{HOOKS}/{created['id']}/test", headers=auth(org["api_key"]))
    assert tested.status == 202
    await receiver.until(lambda r: len(r.ids()) == 5)
    kinds = [got["body"]["type"] for got in receiver.got]
    assert kinds == ["credits.added", "key.budget", "balance.low", "key.budget", "webhook.test"]
    assert all(got["signed"] for got in receiver.got)
    assert receiver.got[-1]["id"] == (await tested.json())["id"]
    low = receiver.of_type("balance.low")[0]["data"]
    assert (low["balance_inr"], low["threshold_inr"], low["request_id"]) == ("99", "99.99", "r2")
    assert [b["data"]["percent"] for b in receiver.of_type("key.budget")] == [50, 100]
    assert receiver.of_type("credits.added")[0]["data"]["balance_inr"] == "105"


async def test_a_failing_endpoint_is_retried_with_the_same_id_then_delivered(hooked, receiver):
    org = await hooked.new_org("100")
    created = await register(hooked, org["api_key"], receiver, events=["credits.added"])
    receiver.fail_next = 2
    await admin.add_credits(hooked.ledger.recorder, org["org_id"], "1")
    await admin.add_credits(hooked.ledger.recorder, org["org_id"], "2")
    await receiver.until(lambda r: len(r.got) == 4)
    assert [got["id"] for got in receiver.got][:3] == [receiver.got[0]["id"]] * 3  # one message, three tries
    assert [b["data"]["amount_inr"] for b in receiver.of_type("credits.added")] == ["1", "1", "1", "2"]
    async def recorded() -> dict | None:
        shown = await (await hooked.client.get(f"{HOOKS}/{created['id']}", headers=auth(org["api_key"]))).json()
        return shown if len(shown["deliveries"]) == 4 else None
    shown = await poll(recorded)
    assert [(d["attempt"], d["status"], d["delivered"]) for d in reversed(shown["deliveries"])] == [
        (1, 503, False), (2, 503, False), (3, 204, True), (1, 204, True)]
    assert shown["failed_attempts"] == 0 and shown["failing_since"] is None


async def test_an_endpoint_failing_too_long_is_disabled_until_enabled(make_gateway, config, receiver):
    gateway = await make_gateway(hooks_config(config, retry_for_s=0.3))
    org = await gateway.new_org("100")
    created = await register(gateway, org["api_key"], receiver, events=["credits.added"])
    receiver.fail_next = 10_000
    await admin.add_credits(gateway.ledger.recorder, org["org_id"], "1")
    path, key = f"{HOOKS}/{created['id']}", auth(org["api_key"])

    async def disabled() -> dict | None:
        shown = await (await gateway.client.get(path, headers=key)).json()
        return shown if not shown["enabled"] else None
    shown = await poll(disabled, timeout=10)
    assert "kept failing" in shown["disabled_reason"] and "HTTP 503" in shown["disabled_reason"]
    receiver.fail_next, tried = 0, len(receiver.got)
    again = await gateway.client.patch(path, json={"enabled": True}, headers=key)
    assert (await again.json())["enabled"] is True
    await receiver.until(lambda r: len(r.got) > tried)
    final = await poll(lambda: _delivered(gateway, path, key))
    assert final["deliveries"][0]["delivered"] is True and final["enabled"] is True
    assert len(receiver.ids()) == 1  # the one message, tried until it went through


async def _delivered(gateway, path: str, key: dict) -> dict | None:
    shown = await (await gateway.client.get(path, headers=key)).json()
    return shown if shown["deliveries"] and shown["deliveries"][0]["delivered"] else None


async def test_managing_endpoints(hooked, receiver, tmp_path):
    org, other = await hooked.new_org("100"), await hooked.new_org("100")
    member = await admin.create_key(hooked.ledger.recorder, org["org_id"], "member")
    await hooked.ledger.follower.catch_up()
    created = await register(hooked, org["api_key"], receiver, events=["credits.added"])
    one, key = f"{HOOKS}/{created['id']}", auth(org["api_key"])
    listed = await (await hooked.client.get(HOOKS, headers=key)).json()
    assert [item["id"] for item in listed["data"]] == [created["id"]] and "secret" not in listed["data"][0]
    changed = await hooked.client.patch(one, json={"events": ["balance.low"], "balance_low_inr": "7"}, headers=key)
    assert (await changed.json())["balance_low_inr"] == 7
    for method, path in (("GET", HOOKS), ("POST", HOOKS), ("GET", one), ("PATCH", one), ("DELETE", one),
                         ("POST", one + "/test")):
        refused = await hooked.client.request(method, path, json={}, headers=auth(member["api_key"]))
        assert refused.status == 403, (method, path)
        if path != HOOKS:
            hidden = await hooked.client.request(method, path, json={}, headers=auth(other["api_key"]))
            assert hidden.status in (400, 404), (method, path)
    stored = Path(str(tmp_path / "ledger.db")).read_bytes() + Path(f"{tmp_path}/ledger.db-wal").read_bytes() \
        if Path(f"{tmp_path}/ledger.db-wal").exists() else Path(str(tmp_path / "ledger.db")).read_bytes()
    assert created["secret"].encode() not in stored and base64.b64decode(created["secret"][6:]) not in stored
    deleted = await hooked.client.delete(one, headers=key)
    assert (await deleted.json())["deleted"] is True
    assert (await hooked.client.get(one, headers=key)).status == 404
    with sqlite3.connect(tmp_path / "ledger.db") as db:
        assert db.execute("SELECT COUNT(*) FROM secrets WHERE name LIKE 'webhook:%'").fetchone() == (0,)


@pytest.mark.parametrize("body, says", [
    ({"url": "https://example.com", "events": ["budget.low"]}, "events"),
    ({"url": "https://example.com", "events": []}, "events"),
    ({"url": "https://example.com", "events": ["balance.low"]}, "balance_low_inr"),
    ({"url": "https://example.com", "events": ["balance.low"], "balance_low_inr": "-1"}, "balance_low_inr"),
    ({"url": "https://example.com", "events": ["balance.low"], "balance_low_inr": "NaN"}, "balance_low_inr"),
    ({"url": "https://example.com", "events": ["balance.low"], "balance_low_inr": "ten"}, "balance_low_inr"),
    ({"url": "https://example.com", "events": ["key.budget"], "key_budget_percent": list(range(1, 12))},
     "key_budget_percent"),
    ({"url": "https://" + "a" * 3000 + ".com/", "events": ["credits.added"]}, "url"),
    ({"url": 7, "events": ["credits.added"]}, "url"),
    ({"url": "https://example.com", "events": ["key.budget"], "key_budget_percent": [0]}, "key_budget_percent"),
    ({"url": "https://example.com", "events": ["key.expiring"], "key_expiring_hours": 0}, "key_expiring_hours"),
    ({"url": "https://example.com", "events": ["credits.added"], "secret": "mine"}, "secret"),
    ({"events": ["credits.added"]}, "url"),
    ({"url": "http://example.com/hook", "events": ["credits.added"]}, "https"),
    ({"url": "https://127.0.0.1/hook", "events": ["credits.added"]}, "127.0.0.1"),
    ({"url": "https://localhost/hook", "events": ["credits.added"]}, "localhost"),
    ({"url": "https://169.254.169.254/latest/meta-data", "events": ["credits.added"]}, "169.254.169.254"),
    ({"url": "https://[::1]:8443/", "events": ["credits.added"]}, "::1"),
    ({"url": "https://10.0.0.7/", "events": ["credits.added"]}, "10.0.0.7"),
    ({"url": "https://user:pw@example.com/", "events": ["credits.added"]}, "url"),
    ({"url": "ftp://example.com/", "events": ["credits.added"]}, "url"),
])
async def test_bad_endpoints_are_refused_naming_why(gateway, org, body, says):
    response = await gateway.client.post(HOOKS, json=body, headers=auth(org["api_key"]))
    assert response.status == 400, await response.text()
    error = (await response.json())["error"]
    assert says in error["message"] or says == error["param"], error


async def test_a_receiver_holding_its_answer_never_holds_a_request(hooked, receiver):
    org = await hooked.new_org("100")
    await register(hooked, org["api_key"], receiver, events=["credits.added"])
    receiver.hold_s = 6.0
    await admin.add_credits(hooked.ledger.recorder, org["org_id"], "1")
    await receiver.until(lambda r: len(r.got) == 1)  # a delivery waits on the receiver now
    started = time.monotonic()
    for _ in range(10):
        answer = await hooked.client.post("/v1/chat/completions", json=chat_body(), headers=auth(org["api_key"]))
        assert answer.status == 200
    assert time.monotonic() - started < receiver.hold_s / 2  # not one of them waited on the delivery


async def test_a_key_expiring_soon_and_a_request_refused_by_its_budget(hooked, receiver):
    org = await hooked.new_org("100")
    soon = await admin.create_key(hooked.ledger.recorder, org["org_id"], "soon")
    spent = await admin.create_key(hooked.ledger.recorder, org["org_id"], "spent")
    await hooked.ledger.follower.catch_up()
    created = await register(hooked, org["api_key"], receiver, events=["key.expiring", "request.refused"],
                             key_expiring_hours=2)
    key = auth(org["api_key"])
    in_an_hour = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))
    for key_id, change in ((soon["key_id"], {"expires_at": in_an_hour}), (spent["key_id"], {"budget_inr": "0"})):
        changed = await hooked.client.patch(f"/v1/keys/{key_id}", json=change, headers=key)
        assert changed.status == 200, await changed.text()
    refused = [await hooked.client.post("/v1/chat/completions", json=chat_body(), headers=auth(spent["api_key"]))
               for _ in range(3)]
    assert [r.status for r in refused] == [402, 402, 402]
    await receiver.until(lambda r: len(r.ids()) == 2)
    expiring, = receiver.of_type("key.expiring")
    assert (expiring["data"]["key_id"], expiring["data"]["hours"]) == (soon["key_id"], 2)
    assert expiring["data"]["expires_at"].startswith(in_an_hour[:16])
    refusal, = receiver.of_type("request.refused")  # three refusals within a minute: one alert
    assert (refusal["data"]["key_id"], refusal["data"]["status"]) == (spent["key_id"], 402)
    assert "budget" in refusal["data"]["reason"]
    await asyncio.sleep(0.3)  # later rounds send neither again
    assert len(receiver.got) == 2 and created["id"]


async def test_a_backlog_longer_than_a_window_is_judged_right_across_windows(hooked, receiver):
    """5,000 charges recorded while delivery waits (the endpoint failing): judged a window of
    2,000 at a time once it answers, the money carried from window to window, each alert once."""
    org = await hooked.new_org("100")
    await register(hooked, org["api_key"], receiver, events=["credits.added", "balance.low"],
                   balance_low_inr="60")
    receiver.fail_next = 10_000
    await admin.add_credits(hooked.ledger.recorder, org["org_id"], "1")  # 101: its delivery fails meanwhile
    await receiver.until(lambda r: len(r.got) == 1)
    units = [Append(org["org_id"], [RequestCompleted(
        request_id=f"b{n}", key_id=org["key_id"], route="/v1/chat/completions", model="gpt-4o-mini",
        provider="openai", status=200, charged_inr_nano=10_000_000)]) for n in range(5_000)]  # 0.01 INR each
    for start in range(0, len(units), 500):
        outcomes = await hooked.ledger.recorder.append(units[start:start + 500])
        assert not [outcome for outcome in outcomes if isinstance(outcome, Exception)]
    await admin.add_credits(hooked.ledger.recorder, org["org_id"], "7")  # 51 -> 58
    receiver.fail_next = 0
    await receiver.until(lambda r: len(r.ids()) == 3, timeout=30)
    bodies = {got["id"]: got["body"] for got in receiver.got}
    kinds = [(b["type"], b["data"].get("amount_inr"), b["data"].get("balance_inr"))
             for b in (bodies[i] for i in receiver.ids())]
    # 101 - 0.01 n < 60 first at n = 4101 (the 4,101st charge): in the third window
    assert kinds == [("credits.added", "1", "101"), ("balance.low", None, "59.99"), ("credits.added", "7", "58")]
    low = receiver.of_type("balance.low")[0]
    assert low["data"]["request_id"] == "b4100"
