"""Idempotency-Key claims in the ledger, seen from one gateway: a claim that another process holds,
one it left behind when it died, two gateways on one SQLite file, and the rules themselves.

(Two `gateway serve` processes on PostgreSQL: test_idempotency_replicas.py.)
"""

import asyncio
import time

import msgspec
import pytest

from gateway.accounts import admin
from gateway.edge.errors import ApiError
from gateway.music.idempotency import WINDOW_US, Claim, Patience, Use, next_step
from gateway.music.request import request_hash
from gateway.accounts.sealing import Sealer
from ledger.events import CreditsHeld, IdempotencyKeyClaimed, IdempotencyKeyReleased, RequestCompleted
from ledger.recorder import Append
from tests.support import auth, decimal_json

NOW_US = 1_000 * WINDOW_US


def clip(prompt: str) -> dict:
    return {"model": "tune-3-clip-preview", "prompt": prompt}


async def post_music(gateway, org: dict, key: str, body: dict):
    return await gateway.client.post("/v1/music", json=body, headers={**auth(org["api_key"]), "Idempotency-Key": key})


async def claimed_elsewhere(gateway, org: dict, key: str, body: dict, request_id: str, lease_us: int) -> None:
    """What another replica's claim leaves in the shared ledger."""
    await gateway.ledger.writer.append(Append(org["org_id"], [IdempotencyKeyClaimed(
        idempotency_key=key, request_hash=request_hash(body), request_id=request_id, lease_us=lease_us)]))


async def music_calls(gateway, simulator) -> int:
    records = await (await gateway.client.session.get(simulator.make_url("/_sim/requests"))).json()
    return sum(r["path"].startswith("/v1beta/") for r in records["data"])


# -- the rules ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("use", "step"), [
    (None, "claim"),
    (Use("h", "r1", NOW_US - 1, NOW_US + 1), "wait"),  # running, same body
    (Use("h", "r1", NOW_US - 10, NOW_US - 1), "claim"),  # its lease passed: the claimer died
    (Use("h", "r1", NOW_US - 1, 0), "replay"),  # settled within 24 hours
    (Use("h", "r1", NOW_US - WINDOW_US - 1, 0), "claim"),  # settled more than 24 hours ago
    (Use("other", "r1", NOW_US - WINDOW_US - 1, 0), "claim"),
    (Use("other", "r1", NOW_US - 10, NOW_US - 1), "claim"),
])
def test_what_a_request_does_about_its_keys_use(use, step):
    assert next_step(use, "h", NOW_US) == step


@pytest.mark.parametrize("use", [Use("other", "r1", NOW_US - 1, NOW_US + 1), Use("other", "r1", NOW_US - 1, 0)])
def test_another_body_under_a_live_use_is_409(use):
    with pytest.raises(ApiError) as refused:
        next_step(use, "h", NOW_US)
    assert (refused.value.status, refused.value.type) == (409, "idempotency_conflict")


def test_a_generation_that_outlives_its_lease_is_a_504_and_one_within_it_is_not():
    Claim("k", "h", 1.0, deadline=time.monotonic() + 1).check_lease()
    with pytest.raises(ApiError) as late:
        Claim("k", "h", 1.0, deadline=time.monotonic() - 0.001).check_lease()
    assert late.value.status == 504


def test_a_claim_replacing_a_lapsed_one_releases_it_in_the_same_unit():
    fresh, replacing = Claim("k", "h", 2.5), Claim("k", "h", 2.5, replaces="req_old")
    assert [type(e) for e in fresh.events("req_new")] == [IdempotencyKeyClaimed]
    released, claimed = replacing.events("req_new")
    assert released == IdempotencyKeyReleased(idempotency_key="k", request_id="req_old")
    assert (claimed.request_id, claimed.lease_us) == ("req_new", 2_500_000)


async def test_a_duplicate_gives_up_waiting_with_a_409_once_its_patience_is_spent():
    patience, started = Patience(0.2), time.monotonic()
    with pytest.raises(ApiError) as gave_up:
        while True:
            await patience.pause()
    assert gave_up.value.status == 409 and 0.2 <= time.monotonic() - started < 10  # not forever, on any machine


# -- a claim held by another process ---------------------------------------------------------------

async def test_a_duplicate_waits_for_a_claim_held_elsewhere_and_tries_itself_once_that_fails(gateway, org, simulator):
    body = clip("held elsewhere")
    await claimed_elsewhere(gateway, org, "k", body, "req_elsewhere", 60_000_000)
    other = await post_music(gateway, org, "k", clip("another body"))
    assert other.status == 409 and (await other.json())["error"]["type"] == "idempotency_conflict"
    waiting = asyncio.ensure_future(post_music(gateway, org, "k", body))
    await asyncio.sleep(0.5)
    assert not waiting.done() and await music_calls(gateway, simulator) == 0
    # The other replica's request failed: it releases the key as it records the failure.
    await gateway.ledger.writer.append(Append(org["org_id"], [
        IdempotencyKeyReleased(idempotency_key="k", request_id="req_elsewhere")]))
    response = await waiting
    assert response.status == 200 and await music_calls(gateway, simulator) == 1


async def test_a_claim_left_by_a_dead_replica_lapses_and_the_key_is_taken_over(gateway, org, simulator):
    body = clip("after the crash")
    await claimed_elsewhere(gateway, org, "k", body, "req_dead", lease_us=1)
    response = await post_music(gateway, org, "k", body)
    assert response.status == 200 and await music_calls(gateway, simulator) == 1
    new_id = (await response.json())["id"]
    events = [r.event for r in await gateway.events()]
    takeover = events.index(IdempotencyKeyReleased(idempotency_key="k", request_id="req_dead"))
    assert events[takeover + 1].request_id == new_id  # claimed in the same unit
    assert await gateway.ledger.recorder._fetch("SELECT request_id, running_until_us FROM idempotency_keys") == [
        (new_id, 0)]


# -- two gateways on one SQLite file ----------------------------------------------------------------

async def test_two_gateways_on_one_sqlite_ledger_generate_a_duplicate_once(make_gateway, s3_config, simulator):
    first, second = await make_gateway(s3_config), await make_gateway(s3_config)
    org = await first.new_org("50")
    await second.ledger.follower.catch_up()
    body = clip("shared file [sim:latency_ms=600]")
    one, two = await asyncio.gather(post_music(first, org, "k", body), post_music(second, org, "k", body))
    assert one.status == two.status == 200
    a, b = decimal_json(await one.read()), decimal_json(await two.read())
    assert (a["id"], a["audio"]["base64"]) == (b["id"], b["audio"]["base64"])
    assert await music_calls(first, simulator) == 1
    charges = [r.event for r in await first.events() if isinstance(r.event, RequestCompleted)]
    assert [e.request_id for e in charges] == [a["id"]] and charges[0].charged_inr_nano > 0


async def test_an_org_with_its_own_key_claims_without_a_hold_and_is_never_charged(make_gateway, s3_config, simulator):
    config = msgspec.structs.replace(s3_config, secrets=msgspec.structs.replace(s3_config.secrets, master_key="m" * 32))
    first, second = await make_gateway(config), await make_gateway(config)
    org = await first.new_org("0")
    await admin.set_provider_key(first.ledger.recorder, Sealer("m" * 32), org["org_id"], "google",
                                 "AIzaOwnKey0123456789")
    for gateway in (first, second):
        await gateway.ledger.follower.catch_up()
    body = clip("my own key [sim:latency_ms=400]")
    one, two = await asyncio.gather(post_music(first, org, "k", body), post_music(second, org, "k", body))
    assert one.status == two.status == 200 and (await one.json())["id"] == (await two.json())["id"]
    assert await music_calls(first, simulator) == 1
    events = [r.event for r in await first.events()]
    assert [type(e) for e in events if isinstance(e, IdempotencyKeyClaimed | CreditsHeld)] == [IdempotencyKeyClaimed]
    assert [e.charged_inr_nano for e in events if isinstance(e, RequestCompleted)] == [0]
