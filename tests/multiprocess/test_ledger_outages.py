"""The gateway when its ledger database goes away mid-load (issue 12, finding 4).

PostgreSQL is reached through a TCP proxy the test controls: first it refuses connections (and
resets the open ones), then it blackholes them. Throughout, every answer is a completed 200, a
JSON 503 with Retry-After, or a stream ended with an error event and [DONE]; no answer waits
long; health says which check failed; afterwards requests succeed again by themselves, every
completed 200 has exactly one charge in the ledger, and `gateway ledger verify` passes.
"""

import asyncio
import sqlite3
import time

import msgspec
import pytest

from gateway.edge.state import SERVICES
from tests.gateway.gateway_helpers import closed_port, run_cli_async, write_config
from ledger.backends.postgres import PostgresRecorder
from tests.multiprocess.outage_helpers import (
    assert_every_charge_accounted_for, balance_matches_charges, chat, load, outcome,
)
from tests.support import POSTGRES_DSN, auth, poll, postgres_url

TIMEOUT_S = 0.5  # the ledger's statement and connect timeouts in these tests
BOUND_S = 4.0  # the longest any answer may take while the database is away
HEALTH_BOUND_S = 2.5  # health gives each check 2 s


@pytest.fixture
def proxied_config(config, pg_proxy, pg_schema):
    """The test config with the ledger on PostgreSQL through the proxy, with short timeouts
    (pg_proxy and pg_schema are tests/conftest.py's)."""
    ledger = msgspec.structs.replace(
        config.ledger, url=postgres_url(pg_proxy.port, pg_schema),
        timeout_s=TIMEOUT_S, connect_timeout_s=TIMEOUT_S)
    return msgspec.structs.replace(config, ledger=ledger)


async def health(gateway) -> tuple[int, dict, float]:
    started = time.monotonic()
    response = await gateway.client.get("/")
    assert response.content_type == "application/json"
    return response.status, await response.json(), time.monotonic() - started


async def recorded_events(schema: str) -> list:
    recorder = PostgresRecorder(POSTGRES_DSN, schema)
    await recorder.open(migrate=False)
    try:
        return await recorder.read(0, 100_000)
    finally:
        await recorder.close()


async def until_charged(gateway, key: str, timeout: float = 10.0) -> float:
    """Seconds until a chat succeeds again (failing after `timeout`)."""
    started = time.monotonic()
    while (answer := await chat(gateway.client, key, 1)).status != 200:
        assert time.monotonic() - started < timeout, answer
        await asyncio.sleep(0.1)
    return time.monotonic() - started


@pytest.mark.parametrize("escrow", [True, False], ids=["escrow", "holds"])
async def test_postgres_cut_mid_load_answers_cleanly_and_loses_no_charge(
        make_gateway, proxied_config, pg_proxy, pg_schema, tmp_path, escrow):
    # Short leases: a slice whose draw the outage left unknown lapses, and is expired, soon after.
    # A record queued past a second is withdrawn (the answer: nothing charged).
    leased = msgspec.structs.replace(proxied_config.billing, hold_lease_s=2, escrow_idle_s=0.5, escrow=escrow,
                                     record_timeout_s=1.0)
    gateway = await make_gateway(msgspec.structs.replace(proxied_config, billing=leased))
    org = await gateway.new_org("1000")
    stop = asyncio.Event()
    traffic = asyncio.create_task(load(gateway.client, org["api_key"], stop))
    outages, probes = {}, {}
    await asyncio.sleep(0.8)
    for how in ("refused", "blackholed"):
        outages[how] = time.monotonic()
        await pg_proxy.cut(how)
        await asyncio.sleep(0.3)
        probes[how] = await health(gateway)
        await asyncio.sleep(1.2)
        await pg_proxy.restore()
        outages[how] = (outages[how], time.monotonic())
        await until_charged(gateway, org["api_key"])
        await asyncio.sleep(0.5)
    stop.set()
    answers = await traffic
    # A pooled connection the blackhole left dead may fail one more commit once traffic stops;
    # the ledger is then refused up front until its probe answers (at most 0.5 s): wait for that.
    await until_charged(gateway, org["api_key"])
    assert [(await chat(gateway.client, org["api_key"], n)).status for n in range(4)] == [200] * 4

    for how, (status, body, seconds) in probes.items():
        assert status == 503 and seconds < HEALTH_BOUND_S, (how, body, seconds)
        assert body["health"]["database"]["connected"] is False and body["health"]["database"]["error"]
    assert (await health(gateway))[0] == 200
    slowest = max(answers, key=lambda a: a.seconds)
    assert slowest.seconds < BOUND_S, slowest
    for how, (began, ended) in outages.items():  # each outage really was felt, and answered cleanly
        during = [a for a in answers if a.started < ended and a.started + a.seconds > began + 0.2]
        assert any(outcome(a) != "charged" for a in during), how

    # Holds of requests the outage kept from their record were released once the ledger was back,
    # and records whose COMMIT went unanswered landed (or were found); the idle slice went back,
    # and one the outage left in doubt lapsed and was expired.
    await asyncio.wait_for(gateway.server.app[SERVICES].releases.settled(), 10)
    recorded = await recorded_events(pg_schema)
    outcomes = assert_every_charge_accounted_for(answers, recorded)
    assert outcomes["charged"] > 10 and outcomes["refused"] + outcomes["cut short"] > 2, outcomes

    async def held_now() -> tuple:
        return (await gateway.ledger.recorder._fetch(
            "SELECT credits_inr_nano, spent_inr_nano, held_inr_nano FROM orgs WHERE org_id = ?", (org["org_id"],)))[0]
    credits, spent, held = await poll(held_now, lambda row: row[2] == 0, timeout=10)
    recorded = await recorded_events(pg_schema)
    assert balance_matches_charges(recorded, org["org_id"], credits, credits - spent) and held == 0
    direct = write_config(tmp_path, f'[ledger]\nurl = "{postgres_url(schema=pg_schema)}"\n', "direct.toml")
    verified = await run_cli_async("ledger", "verify", "--config", str(direct))
    assert verified.returncode == 0, verified.stdout + verified.stderr


READ_ROUTES = ("/v1/logs", "/v1/usage", "/v1/music", "/v1/keys")


@pytest.mark.parametrize("how", ["refused", "blackholed"])
async def test_read_routes_answer_503_promptly_while_the_database_is_away(make_gateway, proxied_config,
                                                                          pg_proxy, how):
    gateway = await make_gateway(proxied_config)
    org = await gateway.new_org("10")
    await pg_proxy.cut(how)
    for path in READ_ROUTES:
        started = time.monotonic()
        response = await gateway.client.get(path, headers=auth(org["api_key"]))
        body = await response.json()
        assert (response.status, body["error"]["type"]) == (503, "service_unavailable"), (path, body)
        assert response.headers["Retry-After"] and time.monotonic() - started < BOUND_S, path
    await pg_proxy.restore()
    for path in READ_ROUTES:
        assert (await gateway.client.get(path, headers=auth(org["api_key"]))).status == 200, path


async def test_sqlite_locked_past_the_wait_is_503_then_recovers(make_gateway, config, tmp_path):
    ledger = msgspec.structs.replace(config.ledger, timeout_s=0.3)
    gateway = await make_gateway(msgspec.structs.replace(config, ledger=ledger))
    org = await gateway.new_org("10")
    other = sqlite3.connect(config.ledger.url.removeprefix("sqlite:///"), isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process holds the write lock, and keeps it
    try:
        answers = [await chat(gateway.client, org["api_key"], n) for n in range(2)]
    finally:
        other.execute("ROLLBACK")
        other.close()
    # Both refused before anything was sent: a request's hold is written before its stream starts.
    assert [outcome(a) for a in answers] == ["refused", "refused"]  # streamed, plain
    assert all(a.seconds < BOUND_S for a in answers)
    await until_charged(gateway, org["api_key"])  # within a probe of the lock's release


async def test_an_admin_command_reports_an_unreachable_ledger_in_one_line(tmp_path):
    config = write_config(tmp_path, f'[ledger]\nurl = "{postgres_url(closed_port())}"\n')
    result = await run_cli_async("admin", "balance", "org_nobody", "--config", str(config))
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith("gateway: error: the ledger database is unavailable")
    assert "Traceback" not in result.stderr
