"""Idempotency-Key across replicas (issue 12, finding 2): the key is claimed in the ledger before
the upstream call, so the same key and body sent to two `gateway serve` processes on one
PostgreSQL ledger at once make one upstream call, one track and one charge, and both clients get
the same answer; another body is 409; a failed first attempt frees the key for a retry.

The music upstream is the simulator behind a small relay this test runs, which can fail a chosen
prompt once (the simulator answers a prompt the same way every time). Skipped locally when no
PostgreSQL listens on 127.0.0.1:5432; a failure under CI=true.
"""

import asyncio
import signal
from collections import Counter
from decimal import Decimal

import aiohttp
import pytest
from aiohttp import web

from tests.gateway.gateway_helpers import (
    admin_cli, gateway_process, postgres_ledger_url, replica_toml, run_cli_async, write_config,
)
from ledger.events import IdempotencyKeyClaimed, IdempotencyKeyReleased, RequestCompleted
from ledger.backends.postgres import PostgresRecorder
from tests.support import PROVIDER_KEY, auth, clean_env, decimal_json

PRICE_INR = Decimal("0.05") * 84  # one clip at the default rate
FAIL_ONCE = web.AppKey("fail_once", set)
SESSION = web.AppKey("session", aiohttp.ClientSession)


@pytest.fixture
async def ledger_url():
    async with postgres_ledger_url("idem") as url:
        yield url


@pytest.fixture
async def relay(aiohttp_server, sim_url):
    """The simulator, except that a prompt added to `relay.app[FAIL_ONCE]` is answered 500 once
    (after a short pause, so a duplicate arrives while that attempt is still running)."""
    async def forward(request: web.Request) -> web.Response:
        body = await request.read()
        failing = next((p for p in request.app[FAIL_ONCE] if p.encode() in body), None)
        if failing:
            request.app[FAIL_ONCE].discard(failing)
            await asyncio.sleep(0.5)
            return web.json_response({"error": {"code": 500, "message": "relay failure", "status": "INTERNAL"}},
                                     status=500)
        headers = {name: request.headers[name] for name in ("Content-Type", "x-goog-api-key")
                   if name in request.headers}
        async with request.app[SESSION].post(sim_url + request.path_qs, data=body, headers=headers) as answer:
            return web.Response(status=answer.status, body=await answer.read(), content_type=answer.content_type)

    app = web.Application()
    app.router.add_post("/{path:.*}", forward)
    app[FAIL_ONCE] = set()
    async with aiohttp.ClientSession() as session:
        app[SESSION] = session
        yield await aiohttp_server(app)


@pytest.fixture
def replica_config(tmp_path, ledger_url, relay, s3_server, s3_bucket) -> str:
    return str(write_config(tmp_path, f"""
{replica_toml(ledger_url, s3_server, s3_bucket)}
[providers.google]
base_url = "{str(relay.make_url('')).rstrip('/')}"
api_key = "{PROVIDER_KEY}"
"""))


@pytest.fixture
async def replicas(replica_config, replicated_org):
    """The URLs of two `gateway serve` processes on the one ledger, bucket and upstream (started
    after the organization exists, so its key works at once)."""
    async with gateway_process("serve", "--port", "0", "--config", replica_config, env=clean_env()) as first, \
            gateway_process("serve", "--port", "0", "--config", replica_config, env=clean_env()) as second:
        yield [await first.ready_url(), await second.ready_url()]
        assert await first.stop(signal.SIGTERM) == 0 and await second.stop(signal.SIGTERM) == 0


@pytest.fixture
async def replicated_org(replica_config) -> dict:
    return await admin_cli(replica_config, "create-org", "replicated", "--credits-inr", "50")


async def post(url: str, org: dict, key: str, prompt: str) -> tuple[int, dict]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session, session.post(
            f"{url}/v1/music", headers={**auth(org["api_key"]), "Idempotency-Key": key},
            json={"model": "tune-3-clip-preview", "prompt": prompt}) as response:
        return response.status, decimal_json(await response.read())


def answer_of(body: dict) -> tuple:
    """What both clients must get alike (`created` is the second it was made or replayed in)."""
    return body["id"], body["audio"]["base64"], body["audio"]["url"], body["text"], body["usage"]


async def upstream_prompts(sim_url: str) -> Counter:
    """How often each prompt reached the simulator."""
    async with aiohttp.ClientSession() as session:
        records = (await (await session.get(f"{sim_url}/_sim/requests")).json())["data"]
    return Counter(r["body"]["contents"][0]["parts"][0]["text"] for r in records if r["path"].startswith("/v1beta/"))


async def ledger_events(ledger_url: str) -> list:
    recorder = PostgresRecorder.from_url(ledger_url)
    await recorder.open(migrate=False)
    try:
        return [r.event for r in await recorder.read(0, 100_000)]
    finally:
        await recorder.close()


async def balance(config: str, org: dict) -> Decimal:
    result = await run_cli_async("admin", "balance", org["org_id"], "--config", config)
    return decimal_json(result.stdout.encode())["balance_inr"]


async def test_the_same_key_and_body_on_two_replicas_at_once_is_one_call_one_track_one_charge(
        replicas, replicated_org, replica_config, ledger_url, sim_url):
    prompts = [f"pair {n} [sim:latency_ms=700]" for n in range(4)]

    async def other_body_meanwhile() -> tuple[int, dict]:
        await asyncio.sleep(0.3)  # pair 0 has claimed its key by now and is still generating
        return await post(replicas[1], replicated_org, "pair-0", "another song")

    *answers, meanwhile = await asyncio.gather(
        *(post(url, replicated_org, f"pair-{n}", prompt) for n, prompt in enumerate(prompts) for url in replicas),
        other_body_meanwhile())
    assert [status for status, _ in answers] == [200] * 8
    for first, second in zip(answers[::2], answers[1::2], strict=True):
        assert answer_of(first[1]) == answer_of(second[1])  # one track, whichever replica answered
    assert len({body["id"] for _, body in answers}) == 4
    assert meanwhile[0] == 409 and meanwhile[1]["error"]["type"] == "idempotency_conflict"
    after = await post(replicas[0], replicated_org, "pair-1", "another song")
    assert after[0] == 409 and after[1]["error"]["param"] == "Idempotency-Key"

    upstream = await upstream_prompts(sim_url)
    assert [upstream[prompt] for prompt in prompts] == [1] * 4 and sum(upstream.values()) == 4
    events = await ledger_events(ledger_url)
    charges = [e for e in events if isinstance(e, RequestCompleted)]
    assert sorted(e.request_id for e in charges) == sorted(body["id"] for _, body in answers[::2])
    assert all(e.status == 200 and e.charged_inr_nano == PRICE_INR * 10**9 for e in charges)
    assert sorted(e.idempotency_key for e in events if isinstance(e, IdempotencyKeyClaimed)) == [
        f"pair-{n}" for n in range(4)]
    assert await balance(replica_config, replicated_org) == 50 - 4 * PRICE_INR
    result = await run_cli_async("ledger", "verify", "--config", replica_config)
    assert result.returncode == 0, result.stdout + result.stderr


async def test_a_failed_first_attempt_frees_the_key_and_only_the_retry_is_charged(
        replicas, replicated_org, replica_config, ledger_url, sim_url, relay):
    prompt = "flaky song [sim:latency_ms=200]"
    relay.app[FAIL_ONCE].add(prompt)
    # Both at once: one claims and fails (slowly), the other waits for it and then makes its own attempt.
    outcomes = await asyncio.gather(*(post(url, replicated_org, "flaky", prompt) for url in replicas))
    assert sorted(status for status, _ in outcomes) == [200, 502]
    [succeeded] = [body for status, body in outcomes if status == 200]
    for url in replicas:  # a later retry with the key, on either replica, is the successful answer
        status, again = await post(url, replicated_org, "flaky", prompt)
        assert status == 200 and answer_of(again) == answer_of(succeeded)

    assert (await upstream_prompts(sim_url))[prompt] == 1  # the failed attempt never reached it
    events = await ledger_events(ledger_url)
    charges = sorted((e.status, e.charged_inr_nano) for e in events if isinstance(e, RequestCompleted))
    assert charges == [(200, PRICE_INR * 10**9), (502, 0)]
    [released] = [e for e in events if isinstance(e, IdempotencyKeyReleased)]
    assert released.request_id != succeeded["id"]
    assert await balance(replica_config, replicated_org) == 50 - PRICE_INR
    for action in ("verify", "replay", "verify"):
        result = await run_cli_async("ledger", action, "--config", replica_config)
        assert result.returncode == 0, result.stdout + result.stderr
