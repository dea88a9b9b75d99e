"""Escrow where users look (issue 36): a key's listing (GET /v1/keys), the org's overview
(GET /v1/usage), `gateway admin balance` and the monthly statement name what escrow slices hold
(credit a process took ahead, no request running on it) apart from what running requests hold on
their own, each figure equal to a plain sum over the ledger's events; replay rebuilds the same.
"""

import asyncio
from datetime import UTC, datetime
from decimal import Decimal

import msgspec
import pytest

from gateway.accounts import admin
from ledger import audit
from ledger.events import CreditsHeld, HoldReleased, RequestCompleted, is_slice
from ledger.money import from_nano
from tests.support import auth, chat_body, decimal_json, poll

SLOW = "[sim:latency_ms=2500]"  # the simulator answers this late: the request is still running


def billing(config, **fields):
    return msgspec.structs.replace(config, billing=msgspec.structs.replace(config.billing, **fields))


@pytest.fixture(params=["sqlite", "postgresql"])
async def start(request, make_gateway, make_pg_gateway):
    """Every test here runs on the embedded SQLite ledger and on PostgreSQL."""
    return make_gateway if request.param == "sqlite" else make_pg_gateway


async def get(gateway, key: str, path: str) -> dict:
    response = await gateway.client.get(path, headers=auth(key))
    assert response.status == 200, await response.text()
    return decimal_json(await response.read())


async def budgeted_key(gateway, org: dict, budget_inr: str = "50") -> dict:
    response = await gateway.client.post("/v1/keys", json={"name": "budgeted", "budget_inr": budget_inr},
                                         headers=auth(org["api_key"]))
    assert response.status == 201, await response.text()
    return await response.json()


async def chat(gateway, key: str, text: str, **fields) -> int:
    response = await gateway.client.post("/v1/chat/completions", json=chat_body(text, **fields), headers=auth(key))
    await response.read()
    return response.status


async def held_by_events(gateway, key_id: str | None = None) -> tuple[Decimal, Decimal]:
    """What requests' own holds and escrow slices still hold (of one key's holds, when named),
    summed from the events alone."""
    sums = {True: 0, False: 0}
    for r in await gateway.events():
        match r.event:
            case CreditsHeld() as e if key_id in (None, e.key_id):
                sums[is_slice(e.hold_id)] += e.amount_inr_nano
            case HoldReleased() as e if key_id in (None, e.key_id):
                sums[is_slice(e.hold_id)] -= e.amount_inr_nano
            case RequestCompleted(draws=draws):
                for d in draws:
                    sums[is_slice(d.hold_id)] -= d.amount_inr_nano if key_id in (None, d.key_id) else 0
    return from_nano(sums[False]), from_nano(sums[True])


async def listed(gateway, org: dict, key_id: str) -> tuple[Decimal, Decimal]:
    """The key's (reserved_inr, escrow_inr) as GET /v1/keys lists them."""
    body = await get(gateway, org["api_key"], "/v1/keys")
    item = next(item for item in body["data"] if item["id"] == key_id)
    return Decimal(item["reserved_inr"]), Decimal(item["escrow_inr"])


async def agreeing(probe, gateway, key_id: str | None = None, accept=lambda figures: True):
    """`probe()`'s figures once they equal the events' sums (a slice refilling in the background
    may change them between two reads) and `accept` takes them."""
    async def both() -> tuple:
        return await probe(), await held_by_events(gateway, key_id)
    shown, summed = await poll(both, lambda pair: pair[0] == pair[1] and accept(pair[0]))
    assert shown == summed
    return shown


async def balance_of(gateway, org: dict) -> dict:
    """What `gateway admin balance` prints, its amounts exact."""
    return decimal_json(msgspec.json.encode(await admin.balance(gateway.ledger.recorder, org["org_id"])))


async def replays_identically(gateway) -> None:
    recorder = gateway.ledger.recorder
    assert (await audit.verify(recorder))[1] == []
    await audit.replay(recorder)
    assert (await audit.verify(recorder))[1] == []


def this_month() -> str:
    return datetime.now(UTC).strftime("%Y-%m")


async def test_a_keys_slice_is_listed_as_escrow_and_nothing_as_reserved_once_its_requests_end(start, config):
    gateway = await start(billing(config, escrow_idle_s=1.5))
    org = await gateway.new_org("100")
    key = await budgeted_key(gateway, org)
    assert await chat(gateway, key["api_key"], "warm up", max_tokens=5) == 200  # on its own; a slice follows
    await poll(lambda: held_by_events(gateway, key["id"]), lambda held: held[1] > 0)
    assert await chat(gateway, key["api_key"], "from the slice", max_tokens=5) == 200
    reserved, escrow = await agreeing(lambda: listed(gateway, org, key["id"]), gateway, key["id"])
    assert reserved == 0 and escrow > 0  # the slice's remainder: no request is running
    usage = await get(gateway, org["api_key"], "/v1/usage")
    assert (Decimal(usage["held_inr"]), Decimal(usage["escrow_inr"])) == await held_by_events(gateway)
    balance = await balance_of(gateway, org)
    assert (balance["held_inr"], balance["escrow_inr"]) == await held_by_events(gateway)
    assert balance["available_inr"] == balance["balance_inr"] - balance["escrow_inr"]
    # The slice goes back after escrow_idle_s without requests: nothing is held any more.
    assert await poll(lambda: listed(gateway, org, key["id"]), lambda figures: figures[1] == 0, 8) == (0, 0)
    assert await held_by_events(gateway) == (0, 0)
    balance = await balance_of(gateway, org)
    assert (balance["held_inr"], balance["escrow_inr"]) == (0, 0)
    assert balance["available_inr"] == balance["balance_inr"] == await gateway.balance(org["org_id"])
    await replays_identically(gateway)


async def test_a_request_holding_on_its_own_is_reserved_while_it_runs(start, config):
    gateway = await start(billing(config, escrow=False))
    org = await gateway.new_org("100")
    running = gateway.client.post("/v1/chat/completions", json=chat_body(f"slow {SLOW}", max_tokens=50),
                                  headers=auth(org["api_key"]))
    task = asyncio.ensure_future(running)
    reserved, escrow = await agreeing(lambda: listed(gateway, org, org["key_id"]), gateway, org["key_id"],
                                      lambda figures: figures[0] > 0)
    assert reserved > 0 and escrow == 0 and not task.done()  # its own hold, while it runs
    usage = await get(gateway, org["api_key"], "/v1/usage")
    assert (Decimal(usage["held_inr"]), Decimal(usage["escrow_inr"])) == (reserved, 0)
    statement = await get(gateway, org["api_key"], f"/v1/statements/{this_month()}")
    assert (Decimal(statement["held_inr"]), Decimal(statement["escrow_inr"])) == (reserved, 0)
    assert (await task).status == 200
    assert await listed(gateway, org, org["key_id"]) == (0, 0)
    await replays_identically(gateway)


async def test_a_month_with_both_kinds_of_hold_states_each_apart(start, config):
    """A slice taken for small requests, then a request too big for it holding on its own."""
    gateway = await start(billing(config, escrow_idle_s=30))
    org = await gateway.new_org("100")
    key = await budgeted_key(gateway, org)
    assert await chat(gateway, key["api_key"], "warm up", max_tokens=5) == 200
    await poll(lambda: held_by_events(gateway, key["id"]), lambda held: held[1] > 0)
    task = asyncio.ensure_future(chat(gateway, key["api_key"], f"big {SLOW}"))  # the model's whole output limit

    async def stated() -> tuple[Decimal, Decimal]:
        statement = await get(gateway, key["api_key"], f"/v1/statements/{this_month()}")
        return Decimal(statement["held_inr"]), Decimal(statement["escrow_inr"])

    held, escrow = await agreeing(stated, gateway, accept=lambda figures: figures[0] > 0)
    assert held > 0 and escrow > 0 and not task.done()
    reserved, key_escrow = await agreeing(lambda: listed(gateway, org, key["id"]), gateway, key["id"],
                                          lambda figures: figures[0] > 0)
    assert (reserved, key_escrow) == (held, escrow)  # the org's only key holding anything
    assert await task == 200
    held, escrow = await agreeing(stated, gateway)
    assert held == 0 and escrow > 0  # the slice outlives the request
    await replays_identically(gateway)
