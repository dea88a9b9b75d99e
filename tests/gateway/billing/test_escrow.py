"""Escrow and leases in one gateway (issue 24): requests admitted against a slice held ahead are
recorded in one event each, drawing their charge from it; the charge is the true cost whatever was
held, and a provider reporting more than it was allowed is an anomaly, recorded and counted; an
idle slice goes back; a request outliving several leases keeps its hold; lapsed holds are expired
by the gateway and by the sweeper, once.
"""

import asyncio
from datetime import UTC, datetime
from decimal import Decimal

import msgspec
import pytest

from gateway.edge.state import SERVICES
from ledger import audit, leases
from ledger.events import CreditsHeld, HoldReleased, HoldsRenewed, RequestCompleted
from ledger.recorder import Append
from sweeper.sweep import Sweeper
from tests.support import auth, chat_body, poll


def billing(config, **fields):
    return msgspec.structs.replace(config, billing=msgspec.structs.replace(config.billing, **fields))


async def chat(gateway, key: str, text: str, **fields) -> tuple[int, dict]:
    response = await gateway.client.post("/v1/chat/completions", json=chat_body(text, **fields), headers=auth(key))
    return response.status, await response.json()


async def held(gateway, org_id: str) -> int:
    [(amount,)] = await gateway.ledger.recorder._fetch("SELECT held_inr_nano FROM orgs WHERE org_id = ?", (org_id,))
    return amount


async def holds(gateway) -> list[tuple]:
    return await gateway.ledger.recorder._fetch("SELECT hold_id, amount_inr_nano, lapses_at_us FROM holds")


async def replays_identically(gateway) -> None:
    recorder = gateway.ledger.recorder
    assert (await audit.verify(recorder))[1] == []
    await audit.replay(recorder)
    assert (await audit.verify(recorder))[1] == []


async def test_requests_admitted_from_a_slice_cost_one_event_each_and_draw_their_exact_charge(gateway, org):
    assert (await chat(gateway, org["api_key"], "warm up"))[0] == 200
    slices = await poll(lambda: _slices(gateway), bool)
    assert slices, "the first request's demand takes a slice in the background"
    before = len(await gateway.events())
    answers = [await chat(gateway, org["api_key"], f"question {n} [sim:tokens={n + 1}]") for n in range(20)]
    assert {status for status, _ in answers} == {200}
    await gateway.server.app[SERVICES].escrow.settled()  # what the slice holds, below, is then what the events say
    new = [r.event for r in (await gateway.events())[before:]]
    charges = [e for e in new if isinstance(e, RequestCompleted)]
    assert len(charges) == 20 and not [e for e in new if isinstance(e, CreditsHeld) and e.request_id]
    for charge in charges:  # the true cost, drawn whole from the slice; no anomaly
        assert charge.charged_inr_nano == charge.cost_inr_nano > 0 and charge.anomaly == ""
        assert [(d.hold_id, d.amount_inr_nano) for d in charge.draws] == [(slices[0].hold_id, charge.charged_inr_nano)]
    spent = sum(c.charged_inr_nano for c in charges)
    taken = sum(e.amount_inr_nano for e in new if isinstance(e, CreditsHeld))  # refills
    assert await held(gateway, org["org_id"]) == sum(s.amount_inr_nano for s in slices) + taken - spent
    assert gateway.server.app[SERVICES].metrics.escrow.labels("taken")._value.get() >= 1
    await replays_identically(gateway)


async def _slices(gateway) -> list[CreditsHeld]:
    return [r.event for r in await gateway.events() if isinstance(r.event, CreditsHeld) and not r.event.request_id]


async def test_a_provider_reporting_more_than_it_was_allowed_is_charged_its_true_cost_as_an_anomaly(gateway, org):
    status, body = await chat(gateway, org["api_key"], "say a lot [sim:tokens=3000] [sim:overrun]", max_tokens=5)
    assert status == 200 and body["usage"]["completion_tokens"] == 3000
    [charge] = [r.event for r in await gateway.events() if isinstance(r.event, RequestCompleted)]
    assert charge.charged_inr_nano == charge.cost_inr_nano and "more than the" in charge.anomaly
    log = await (await gateway.client.get("/v1/logs", headers=auth(org["api_key"]))).json()
    assert log["data"][0]["anomaly"] == charge.anomaly
    metrics = await (await gateway.client.get("/metrics")).text()
    assert 'gateway_charge_anomalies_total{model="gpt-4o-mini",provider="openai"} 1.0' in metrics
    assert await gateway.balance(org["org_id"]) == Decimal(100) - Decimal(charge.charged_inr_nano) / 10**9
    await replays_identically(gateway)


async def test_an_idle_slice_goes_back_whole(make_gateway, config):
    # A lease long enough that no stall of a loaded machine lapses it: the upkeep still comes every
    # 0.3 s (the idle time), and the slice must go back returned, not expired.
    gateway = await make_gateway(billing(config, escrow_idle_s=0.3, hold_lease_s=30))
    org = await gateway.new_org("100")
    for n in range(3):
        assert (await chat(gateway, org["api_key"], f"q {n}"))[0] == 200
        await asyncio.sleep(0.05)
    assert await poll(lambda: _slices(gateway), bool)
    assert await poll(lambda: held(gateway, org["org_id"]), lambda amount: amount == 0) == 0
    returned = [r.event for r in await gateway.events() if isinstance(r.event, HoldReleased)]
    assert returned and not any(e.expired for e in returned)
    await replays_identically(gateway)


@pytest.mark.parametrize("escrow", [False, True])
async def test_a_request_outliving_several_leases_keeps_its_hold(make_gateway, config, escrow):
    gateway = await make_gateway(billing(config, hold_lease_s=1, escrow=escrow, escrow_idle_s=30))
    org = await gateway.new_org("100")
    if escrow:  # a slice first, so the slow request is admitted from it
        assert (await chat(gateway, org["api_key"], "warm up"))[0] == 200
        await poll(lambda: _slices(gateway), bool)
    status, _ = await chat(gateway, org["api_key"], "slow [sim:latency_ms=3500]")
    assert status == 200
    events = [r.event for r in await gateway.events()]
    assert not [e for e in events if isinstance(e, HoldReleased) and e.expired]  # nothing lapsed
    assert len([e for e in events if isinstance(e, HoldsRenewed)]) >= 3  # three leases and more
    charges = [e for e in events if isinstance(e, RequestCompleted)]
    assert all(c.anomaly == "" and c.charged_inr_nano == c.cost_inr_nano > 0 for c in charges)
    await replays_identically(gateway)


async def test_a_lapsed_hold_is_expired_once_by_the_gateway_or_the_sweeper(make_gateway, config):
    # The gateway's own expiry passes come every few minutes here: the test's two racers go first.
    gateway = await make_gateway(billing(config, hold_lease_s=600, escrow_idle_s=300))
    org = await gateway.new_org("100")
    recorder = gateway.ledger.recorder
    orphan = CreditsHeld(hold_id="hold_of_a_dead_process", request_id="req_dead", amount_inr_nano=5 * 10**9,
                         key_id=org["key_id"], lease_us=1_000_000)
    assert not isinstance((await recorder.append([Append(org["org_id"], [orphan])]))[0], Exception)
    sweeper = Sweeper(recorder, None, 30)
    reports, counts = await asyncio.gather(  # the sweeper and the gateway race for it once it lapses
        poll(lambda: sweeper.run_pass(datetime.now(UTC)), lambda report: report.holds_expired, timeout=3),
        poll(lambda: leases.expire(recorder), bool, timeout=3))
    expired = [r.event for r in await gateway.events() if isinstance(r.event, HoldReleased) and r.event.expired]
    assert [(e.hold_id, e.amount_inr_nano) for e in expired] == [(orphan.hold_id, orphan.amount_inr_nano)]
    assert reports.holds_expired + counts == 1
    await gateway.ledger.follower.catch_up()
    assert await held(gateway, org["org_id"]) == 0 and (await chat(gateway, org["api_key"], "hi"))[0] == 200
    await replays_identically(gateway)
