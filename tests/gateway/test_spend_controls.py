"""Per-key spend controls (issue 17): budgets held exactly under concurrency, allow-lists, expiry,
day budgets resetting at UTC midnight, refusals in the request log, replay -> verify.

The exact-count tests use music, whose flat price is its worst case: each request holds what it
is then charged, so a budget of K prices lets exactly K of any number of concurrent requests in,
whatever order they finish in.
"""

import asyncio
import contextlib
from datetime import UTC, datetime
from decimal import Decimal

import msgspec
import pytest

from gateway.billing import reservations
from gateway.billing.charging import Outcome, record
from gateway.accounts.directory import Principal
from gateway.services import Caller
from gateway.edge.state import SERVICES
from ledger import audit
from ledger.events import CreditsHeld, HoldReleased, RequestCompleted
from ledger.recorder import LedgerUnavailable
from tests.support import (
    auth, chat_body, decimal_json, poll, request_events, transcription_form, upstream_requests, ws_receive, ws_until,
)

PRICE_INR = Decimal("0.05") * 84  # one tune-3-clip-preview generation at the default rate


@pytest.fixture
def config(config, request):
    """Tests of a request's own hold (what a request does when it does not fit this process's
    escrow slice) run with escrow off, so every request holds on its own; the rest as deployed."""
    if request.node.get_closest_marker("own_holds"):
        return msgspec.structs.replace(config, billing=msgspec.structs.replace(config.billing, escrow=False))
    return config


def at_us(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()) * 1_000_000


class Clock:
    """The gateway's ledger clock, moved by the test."""

    def __init__(self, text: str) -> None:
        self.now = at_us(text)

    def __call__(self) -> int:
        return self.now


async def new_key(gateway, org: dict, **limits) -> dict:
    response = await gateway.client.post("/v1/keys", json={"name": "limited", **limits}, headers=auth(org["api_key"]))
    assert response.status == 201, await response.text()
    return await response.json()


async def music(gateway, key: str, prompt: str = "a calm tune") -> tuple[int, dict]:
    response = await gateway.client.post("/v1/music", json={"model": "tune-3-clip-preview", "prompt": prompt},
                                         headers=auth(key))
    return response.status, decimal_json(await response.read())


async def listed(gateway, org: dict, key_id: str) -> dict:
    body = await (await gateway.client.get("/v1/keys", headers=auth(org["api_key"]))).json()
    return next(item for item in body["data"] if item["id"] == key_id)


async def replays_to_the_same_tables(gateway) -> None:
    recorder = gateway.ledger.recorder
    assert (await audit.verify(recorder))[1] == []
    await audit.replay(recorder)
    assert (await audit.verify(recorder))[1] == []


@pytest.mark.parametrize("k", [0, 7])
async def test_64_concurrent_requests_against_a_budget_of_k_prices_let_exactly_k_in(gateway, org, k):
    key = await new_key(gateway, org, budget_inr=str(PRICE_INR * k), budget_period="total")
    results = await asyncio.gather(*(music(gateway, key["api_key"], f"tune {n}") for n in range(64)))
    statuses = [status for status, _ in results]
    assert statuses.count(200) == k and statuses.count(402) == 64 - k
    for status, body in results:
        if status == 402:
            assert body["error"]["code"] == "key_budget_exceeded" and "does not reset" in body["error"]["message"]
    item = await listed(gateway, org, key["id"])
    assert Decimal(str(item["spent_inr"])) == PRICE_INR * k and item["reserved_inr"] == 0
    assert await gateway.balance(org["org_id"]) == Decimal(100) - PRICE_INR * k
    await replays_to_the_same_tables(gateway)


async def test_concurrent_chats_never_spend_past_the_budget_and_each_refusal_says_why(gateway, org):
    key = await new_key(gateway, org, budget_inr="0.05")
    bodies = [chat_body(f"question {n} [sim:tokens=30]", max_tokens=50) for n in range(40)]
    responses = await asyncio.gather(*(gateway.client.post("/v1/chat/completions", json=body,
                                                           headers=auth(key["api_key"])) for body in bodies))
    assert {r.status for r in responses} <= {200, 402} and 200 in {r.status for r in responses}
    charged = [Decimal(r.headers["X-Gateway-Charged-INR"]) for r in responses if r.status == 200]
    assert sum(charged) <= Decimal("0.05")
    for refused in [r for r in responses if r.status == 402]:
        assert (await refused.json())["error"]["code"] == "key_budget_exceeded"
    item = await listed(gateway, org, key["id"])
    assert Decimal(str(item["spent_inr"])) == sum(charged) and item["reserved_inr"] == 0


async def test_the_org_balance_is_the_limit_when_it_is_smaller(gateway):
    org = await gateway.new_org(str(PRICE_INR * 3))
    results = await asyncio.gather(*(music(gateway, org["api_key"], f"tune {n}") for n in range(20)))
    assert [s for s, _ in results].count(200) == 3
    refusal = next(body for status, body in results if status == 402)
    assert refusal["error"]["code"] == "insufficient_credits" and refusal["error"]["limit"] == "org_balance"
    assert await gateway.balance(org["org_id"]) == 0


async def test_a_model_outside_the_allow_list_is_403_before_any_upstream_call(gateway, org, simulator):
    key = await new_key(gateway, org, models=["text-embedding-3-small", "anthropic/*"])
    before = len(await upstream_requests(gateway, simulator))
    response = await gateway.client.post("/v1/chat/completions", json=chat_body("hi", max_tokens=5),
                                         headers=auth(key["api_key"]))
    assert response.status == 403
    error = (await response.json())["error"]
    assert error["code"] == "model_not_allowed" and "gpt-4o-mini" in error["message"]
    assert len(await upstream_requests(gateway, simulator)) == before
    allowed = await gateway.client.post("/v1/messages", headers=auth(key["api_key"]), json={
        "model": "claude-haiku-4-5", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]})
    assert allowed.status == 200
    log = await (await gateway.client.get("/v1/logs?status=403", headers=auth(org["api_key"]))).json()
    assert [entry["error"] for entry in log["data"]] == [error["message"]]


async def test_an_expired_key_is_401_and_its_refusal_is_in_the_log(gateway, org):
    key = await new_key(gateway, org, expires_at="2020-01-01T00:00:00Z")
    response = await gateway.client.post("/v1/chat/completions", json=chat_body("hi"), headers=auth(key["api_key"]))
    assert response.status == 401
    error = (await response.json())["error"]
    assert error["code"] == "key_expired" and "2020-01-01T00:00:00Z" in error["message"]
    refused = [r.event for r in await gateway.events() if isinstance(r.event, RequestCompleted)]
    assert [(e.key_id, e.status) for e in refused] == [(key["id"], 401)]
    patched = await gateway.client.patch(f"/v1/keys/{key['id']}", json={"expires_at": None},
                                         headers=auth(org["api_key"]))
    assert patched.status == 200 and (await patched.json())["expires_at"] is None
    again = await gateway.client.post("/v1/chat/completions", json=chat_body("hi", max_tokens=5),
                                      headers=auth(key["api_key"]))
    assert again.status == 200


async def test_a_day_budget_resets_at_utc_midnight(make_gateway, config):
    clock = Clock("2026-11-26T23:59:00")
    gateway = await make_gateway(config, clock=clock)
    org = await gateway.new_org("100")
    key = await new_key(gateway, org, budget_inr=str(PRICE_INR * 2), budget_period="day")
    assert [(await music(gateway, key["api_key"], f"t{n}"))[0] for n in range(3)] == [200, 200, 402]
    status, body = await music(gateway, key["api_key"], "t3")
    assert status == 402 and body["error"]["resets_at"] == at_us("2026-11-27T00:00:00") // 1_000_000
    assert "resets at 2026-11-27T00:00:00Z" in body["error"]["message"]
    item = await listed(gateway, org, key["id"])
    assert Decimal(str(item["spent_inr"])) == PRICE_INR * 2 and item["budget_period"] == "day"
    clock.now = at_us("2026-11-27T00:00:00")
    assert (await listed(gateway, org, key["id"]))["spent_inr"] == 0
    assert [(await music(gateway, key["api_key"], f"u{n}"))[0] for n in range(3)] == [200, 200, 402]
    cleared = await (await gateway.client.patch(f"/v1/keys/{key['id']}", json={"budget_inr": None},
                                                headers=auth(org["api_key"]))).json()
    assert (Decimal(str(cleared["spent_inr"])), cleared["resets_at"]) == (PRICE_INR * 4, None)  # without a budget: all
    await replays_to_the_same_tables(gateway)


async def test_limits_change_by_patch_and_bad_values_are_400s(gateway, org):
    key = await new_key(gateway, org)
    url, headers = f"/v1/keys/{key['id']}", auth(org["api_key"])
    body = await (await gateway.client.patch(url, json={"budget_inr": "12.5", "budget_period": "month",
                                                        "models": ["gpt-4o-mini", "openai/*"]}, headers=headers)).json()
    assert (body["budget_inr"], body["budget_period"], body["models"]) == (12.5, "month", ["gpt-4o-mini", "openai/*"])
    body = await (await gateway.client.patch(url, json={"budget_inr": None}, headers=headers)).json()
    assert body["budget_inr"] is None and body["models"] == ["gpt-4o-mini", "openai/*"]
    for bad, says in [({"budget_inr": "-1"}, "positive"), ({"models": ["no-such-model"]}, "not in the catalogue"),
                      ({"expires_at": "soon"}, "ISO 8601"), ({"budget_period": "week"}, "budget_period")]:
        response = await gateway.client.patch(url, json=bad, headers=headers)
        assert response.status == 400 and says in (await response.json())["error"]["message"], bad
    not_admin = await gateway.client.patch(url, json={"budget_inr": "1"}, headers=auth(key["api_key"]))
    assert not_admin.status == 403
    await replays_to_the_same_tables(gateway)


# -- every route counts ---------------------------------------------------------------------------

ROUTES = {
    "chat": ("/v1/chat/completions", chat_body("hi", max_tokens=5)),
    "completions": ("/v1/completions", {"model": "gpt-3.5-turbo-instruct", "prompt": "hi", "max_tokens": 5}),
    "messages": ("/v1/messages", {"model": "claude-haiku-4-5", "max_tokens": 5,
                                  "messages": [{"role": "user", "content": "hi"}]}),
    "responses": ("/v1/responses", {"model": "gpt-4o-mini", "input": "hi", "max_output_tokens": 5}),
    "embeddings": ("/v1/embeddings", {"model": "text-embedding-3-small", "input": "hi"}),
    "speech": ("/v1/audio/speech", {"model": "tts-1", "input": "hi", "voice": "alloy"}),
    "music": ("/v1/music", {"model": "tune-3-clip-preview", "prompt": "a tune"}),
}


async def send(gateway, key: str, route: str) -> tuple[int, dict]:
    if route == "transcription":
        form = transcription_form(b"RIFF" + b"\0" * 4000)
        response = await gateway.client.post("/v1/audio/transcriptions", data=form, headers=auth(key))
    elif route == "realtime":
        response = await gateway.client.get("/v1/realtime?model=gpt-4o-realtime-preview", headers={
            **auth(key), "Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
            "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="})
    else:
        path, body = ROUTES[route]
        response = await gateway.client.post(path, json=body, headers=auth(key))
    body = await response.read()  # to its end: a stream is charged after its last byte
    return response.status, decimal_json(body) if response.status != 200 else {}


@pytest.mark.own_holds
@pytest.mark.parametrize("route", [*ROUTES, "transcription", "realtime"])
async def test_every_paid_route_holds_against_the_key_budget(gateway, org, simulator, route):
    empty = await new_key(gateway, org, budget_inr="0")
    before = len(await upstream_requests(gateway, simulator))
    status, body = await send(gateway, empty["api_key"], route)
    assert status == 402 and body["error"]["code"] == "key_budget_exceeded", body
    assert len(await upstream_requests(gateway, simulator)) == before  # refused before any upstream call
    funded = await new_key(gateway, org, budget_inr="50")
    if route == "realtime":
        return  # a session's holds: the realtime tests below
    assert (await send(gateway, funded["api_key"], route))[0] == 200
    events = [r.event for r in await gateway.events()]
    held = [e for e in events if isinstance(e, CreditsHeld) and e.key_id == funded["id"]]
    released = [e for e in events if isinstance(e, HoldReleased) and e.key_id == funded["id"]]
    assert len(held) == 1 and [(e.hold_id, e.amount_inr_nano) for e in released] == [
        (held[0].hold_id, held[0].amount_inr_nano)]
    [charge] = [e for e in events if isinstance(e, RequestCompleted) and e.key_id == funded["id"]]
    assert 0 < charge.charged_inr_nano <= held[0].amount_inr_nano
    item = await listed(gateway, org, funded["id"])
    assert Decimal(str(item["spent_inr"])) * 10**9 == charge.charged_inr_nano and item["reserved_inr"] == 0


async def test_counting_tokens_is_free_and_holds_nothing(gateway, org):
    empty = await new_key(gateway, org, budget_inr="0")
    response = await gateway.client.post("/v1/messages/count_tokens", headers=auth(empty["api_key"]), json={
        "model": "claude-haiku-4-5", "messages": [{"role": "user", "content": "hi"}]})
    assert response.status == 200


# -- realtime: per response ------------------------------------------------------------------------

async def realtime(gateway, key: str):
    ws = await gateway.client.ws_connect("/v1/realtime?model=gpt-4o-realtime-preview",
                                         headers={**auth(key), "OpenAI-Beta": "realtime=v1"})
    assert (await ws_receive(ws))["type"] == "session.created"
    await ws.send_json({"type": "session.update", "session": {"modalities": ["text"]}})
    assert (await ws_receive(ws))["type"] == "session.updated"
    return ws


async def ask(ws, text: str) -> dict:
    await ws.send_json({"type": "conversation.item.create", "item": {
        "type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}})
    assert (await ws_receive(ws))["type"] == "conversation.item.created"
    await ws.send_json({"type": "response.create"})
    return (await ws_until(ws, "response.done"))[-1] if text else await ws_receive(ws)


@pytest.mark.own_holds
async def test_realtime_settles_each_response_from_response_done_and_holds_the_next(gateway, org):
    key = await new_key(gateway, org, budget_inr="50")
    ws = await realtime(gateway, key["api_key"])
    for text in ("one two", "three four"):
        done = await ask(ws, text)
        assert done["type"] == "response.done"
    during = await listed(gateway, org, key["id"])
    assert during["reserved_inr"] > 0 and during["spent_inr"] == 0  # the session is charged when it ends
    await ws.close()
    [charge] = await poll(lambda: request_events(gateway), bool)
    events = [r.event for r in await gateway.events()]
    held = sum(e.amount_inr_nano for e in events if isinstance(e, CreditsHeld))
    freed = [e.amount_inr_nano for e in events if isinstance(e, HoldReleased)]
    assert held == sum(freed) and len(freed) >= 3  # settled after each response.done, the rest at the end
    after = await poll(lambda: listed(gateway, org, key["id"]), lambda item: item["spent_inr"] > 0)
    assert Decimal(str(after["spent_inr"])) * 10**9 == charge.charged_inr_nano > 0 and after["reserved_inr"] == 0
    await replays_to_the_same_tables(gateway)


async def test_a_realtime_response_that_does_not_fit_is_refused_with_an_error_event(gateway, org, simulator):
    # The session's opening hold (one response of 4,096 output tokens, about 6.88 INR) fits; the
    # first response.create, whose input is now bounded by what the client sent, does not.
    key = await new_key(gateway, org, budget_inr="6.9")
    ws = await realtime(gateway, key["api_key"])
    await ws.send_json({"type": "conversation.item.create", "item": {
        "type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi " * 100}]}})
    assert (await ws_receive(ws))["type"] == "conversation.item.created"
    await ws.send_json({"type": "response.create"})
    refusal = await ws_receive(ws)
    assert refusal["type"] == "error" and refusal["error"]["code"] == "key_budget_exceeded"
    assert not [r for r in await upstream_requests(gateway, simulator)
                if "response.create" in str(r.get("body", ""))]
    await ws.close()
    [charge] = await poll(lambda: request_events(gateway), bool)
    assert charge.charged_inr_nano == 0
    assert (await listed(gateway, org, key["id"]))["reserved_inr"] == 0


@pytest.mark.own_holds
async def test_a_stream_the_client_leaves_settles_what_was_delivered_and_frees_the_rest(gateway, org):
    key = await new_key(gateway, org, budget_inr="5")
    body = chat_body("go [sim:hang_after=3]", stream=True, max_tokens=200)
    response = await gateway.client.post("/v1/chat/completions", json=body, headers=auth(key["api_key"]))
    received = b""
    while received.count(b"data: ") < 3:
        received += await asyncio.wait_for(response.content.readany(), 5)
    response.close()
    [charge] = await poll(lambda: request_events(gateway), bool)
    assert charge.status == 499 and charge.charged_inr_nano > 0
    [hold] = [r.event for r in await gateway.events() if isinstance(r.event, CreditsHeld)]
    assert charge.charged_inr_nano < hold.amount_inr_nano  # what was delivered, not the worst case
    item = await poll(lambda: listed(gateway, org, key["id"]), lambda item: item["reserved_inr"] == 0)
    assert Decimal(str(item["spent_inr"])) * 10**9 == charge.charged_inr_nano and item["reserved_inr"] == 0


@pytest.mark.own_holds
async def test_a_whole_answer_the_client_stops_waiting_for_releases_its_hold(gateway, org):
    key = await new_key(gateway, org, budget_inr="5")
    body = chat_body("slow [sim:tokens=20] [sim:tps=4]", max_tokens=50)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(gateway.client.post("/v1/chat/completions", json=body, headers=auth(key["api_key"])),
                               0.5)
    item = await poll(lambda: listed(gateway, org, key["id"]), lambda item: item["reserved_inr"] == 0)
    assert item["reserved_inr"] == 0 and item["spent_inr"] == 0
    events = [r.event for r in await gateway.events()]
    [hold] = [e for e in events if isinstance(e, CreditsHeld)]
    assert [(e.hold_id, e.amount_inr_nano) for e in events if isinstance(e, HoldReleased)] == [
        (hold.hold_id, hold.amount_inr_nano)]
    assert gateway.ledger.directory.account(org["org_id"]).held_inr_nano == 0
    await replays_to_the_same_tables(gateway)


@pytest.mark.own_holds
@pytest.mark.parametrize("wait", [0, 1])
async def test_a_hold_written_for_a_request_cancelled_meanwhile_is_still_noted_and_so_released_once(
        gateway, org, wait):
    services = gateway.server.app[SERVICES]
    caller = Caller(Principal(org["key_id"], org["org_id"]), "req_cancelled")
    task = asyncio.ensure_future(reservations.top_up(services, caller, 1_000_000))
    for _ in range(wait):
        await asyncio.sleep(0)  # the writer has taken its unit (or, without waiting, not yet)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    while services.writer.backlog()[0]:  # whatever the writer took, committed
        await asyncio.sleep(0.01)
    held = [r.event for r in await gateway.events() if isinstance(r.event, CreditsHeld)]
    assert [h.hold_id for h in held] == [h.hold_id for h in caller.holds]  # what the ledger holds, noted
    reservations.release_all(services, caller, "/v1/chat/completions", asyncio.CancelledError())
    await services.releases.settled()
    assert caller.holds == [] and gateway.ledger.directory.account(org["org_id"]).held_inr_nano == 0
    await replays_to_the_same_tables(gateway)


@pytest.mark.own_holds
async def test_holds_whose_request_was_recorded_after_all_are_not_released_twice(gateway, org):
    # A record whose commit timed out may have committed, its holds released with it: the request
    # then still holds them as far as it knows, and hands them to the background releases.
    services = gateway.server.app[SERVICES]
    caller = Caller(Principal(org["key_id"], org["org_id"]), "req_recorded")
    await reservations.top_up(services, caller, 1_000_000)
    holds = list(caller.holds)
    await record(services, caller, Outcome(route="/v1/chat/completions", model="m", provider="p", status=502))
    caller.holds.extend(holds)  # what it knows after a commit that seemed to fail
    reservations.release_all(services, caller, "/v1/chat/completions", LedgerUnavailable("timed out"))
    await services.releases.settled()
    assert gateway.ledger.directory.account(org["org_id"]).held_inr_nano == 0
    assert [r.event.status for r in await gateway.events() if isinstance(r.event, RequestCompleted)] == [502]
    await replays_to_the_same_tables(gateway)


@pytest.mark.own_holds
async def test_a_request_that_ends_unrecorded_is_recorded_uncharged_with_its_holds_released(gateway, org):
    services = gateway.server.app[SERVICES]
    caller = Caller(Principal(org["key_id"], org["org_id"]), "req_unrecorded")
    await reservations.top_up(services, caller, 1_000_000)
    reservations.release_all(services, caller, "/v1/chat/completions", asyncio.CancelledError())
    await services.releases.settled()
    [ended] = [r.event for r in await gateway.events() if isinstance(r.event, RequestCompleted)]
    assert (ended.request_id, ended.status, ended.charged_inr_nano) == ("req_unrecorded", 499, 0)
    assert gateway.ledger.directory.account(org["org_id"]).held_inr_nano == 0
