"""Circuit breaking: a provider that keeps failing is skipped while it cools, probed once, and
closed again when the probe answers; shared by every gateway through Redis."""

import asyncio
import re
import time

import msgspec
import pytest
import redis.asyncio as aioredis

from tests.gateway.routing.duo_helpers import duo_config
from gateway.accounts import admin
from gateway.accounts.sealing import Sealer
from tests.support import need_service, poll

# Long beside any stall of a loaded machine: what must still be skipped comes well within it, and
# the half-open state is waited for, not slept into.
COOLDOWN_S = 2.0


@pytest.fixture
async def duo(make_duo):
    return await make_duo(cooldown_s=COOLDOWN_S)


async def half_open(duo, provider: str = "sim-a") -> None:
    assert await poll(lambda: circuit_state(duo, provider), lambda state: state == 1) == 1


async def circuit_state(duo, provider: str) -> float:
    text = await (await duo.gateway.client.get("/metrics")).text()
    match = re.search(rf'^gateway_circuit_state{{provider="{re.escape(provider)}"}} (\S+)$', text, re.M)
    return float(match.group(1)) if match else 0.0


async def test_the_circuit_opens_skips_probes_and_closes(duo):  # failure_threshold 2
    await duo.a.outage("503")
    for _ in range(2):
        assert (await duo.chat()).headers["X-Gateway-Provider"] == "sim-b"
    assert await duo.a.count() == 2 and await circuit_state(duo, "sim-a") == 2  # open
    skipped = await duo.chat()
    assert skipped.headers["X-Gateway-Provider"] == "sim-b" and await duo.a.count() == 2  # not even tried
    [event] = await duo.completed(skipped.headers["X-Request-Id"])
    assert [a.provider for a in event.attempts] == ["sim-b"]
    await duo.a.outage("")
    await half_open(duo)  # one probe may go
    probe = await duo.chat()
    assert probe.headers["X-Gateway-Provider"] == "sim-a" and await duo.a.count() == 3
    assert await circuit_state(duo, "sim-a") == 0
    assert (await duo.chat()).headers["X-Gateway-Provider"] == "sim-a"


async def test_a_failed_probe_opens_the_circuit_again(duo):
    await duo.a.outage("503")
    for _ in range(2):
        await duo.chat()
    await half_open(duo)
    assert (await duo.chat()).headers["X-Gateway-Provider"] == "sim-b" and await duo.a.count() == 3  # the probe failed
    assert (await duo.chat()).headers["X-Gateway-Provider"] == "sim-b" and await duo.a.count() == 3  # open again


async def test_a_429_with_retry_after_opens_the_circuit_at_once_for_as_long_as_it_asks(make_duo):
    duo = await make_duo()  # the 0.5 s cooldown, far shorter than the 4 s asked for
    await duo.a.outage("429", retry_after="4")
    started = time.monotonic()
    assert (await duo.chat()).headers["X-Gateway-Provider"] == "sim-b"
    assert (await duo.chat()).headers["X-Gateway-Provider"] == "sim-b"
    assert await duo.a.count() == 1  # one failure, yet skipped: it asked for time
    await duo.a.outage("")
    await asyncio.sleep(0.7)
    assert await circuit_state(duo, "sim-a") == 2  # still open after the 0.5 s cooldown: it asked for 4 s
    await half_open(duo)
    assert time.monotonic() - started >= 4  # all it asked for
    assert (await duo.chat()).headers["X-Gateway-Provider"] == "sim-a"


async def test_a_request_refused_with_400_does_not_count_against_the_circuit(duo):
    await duo.a.outage("400")
    for _ in range(3):
        assert (await duo.chat()).status == 400
    assert await duo.a.count() == 3 and await circuit_state(duo, "sim-a") == 0


async def test_when_every_circuit_is_open_the_request_still_tries_them(duo):
    await duo.a.outage("503")
    await duo.b.outage("503")
    for _ in range(2):
        assert (await duo.chat()).status == 502
    assert await circuit_state(duo, "sim-a") == 2 and await circuit_state(duo, "sim-b") == 2
    await duo.b.outage("")
    response = await duo.chat()  # a breaker moves traffic; it never invents an outage
    assert response.status == 200 and response.headers["X-Gateway-Provider"] == "sim-b"


async def test_attempts_and_failovers_are_counted_by_provider_and_reason(duo):
    await duo.a.outage("503")
    await duo.chat()
    text = await (await duo.gateway.client.get("/metrics")).text()
    assert 'gateway_failovers_total{provider="sim-a",reason="503"} 1.0' in text
    assert 'gateway_upstream_attempts_total{outcome="503",provider="sim-a"} 1.0' in text
    assert 'gateway_upstream_attempts_total{outcome="ok",provider="sim-b"} 1.0' in text


@pytest.fixture
async def redis_url():
    need_service("127.0.0.1", 6379, "Redis")
    client = aioredis.Redis.from_url("redis://127.0.0.1:6379/0")
    await client.delete("gw:circuit:sim-a", "gw:circuit:sim-b")
    yield "redis://127.0.0.1:6379/0"
    await client.delete("gw:circuit:sim-a", "gw:circuit:sim-b")
    await client.aclose()


async def test_a_circuit_opened_by_one_gateway_is_skipped_by_another_through_redis(
        make_duo, make_gateway, config, tmp_path, redis_url):
    with_redis = msgspec.structs.replace(config, redis=msgspec.structs.replace(config.redis, url=redis_url))
    first = await make_duo(cooldown_s=5)
    first.gateway = await make_gateway(duo_config(with_redis, first.a, first.b, tmp_path / "one", cooldown_s=5))
    second = await make_gateway(duo_config(with_redis, first.a, first.b, tmp_path / "two", cooldown_s=5))
    org_one, org_two = await first.gateway.new_org("10"), await second.new_org("10")
    await first.a.outage("503")
    for _ in range(2):
        first.org = org_one
        assert (await first.chat()).headers["X-Gateway-Provider"] == "sim-b"
    assert await first.a.count() == 2
    first.gateway, first.org = second, org_two  # the other replica, which has never seen sim-a fail
    response = await first.chat()
    assert response.headers["X-Gateway-Provider"] == "sim-b" and await first.a.count() == 2


async def test_a_request_refused_before_its_call_leaves_the_probe_to_the_next(make_duo):
    duo = await make_duo(master_key="m" * 32, cooldown_s=COOLDOWN_S)
    await duo.a.outage("503")
    for _ in range(2):
        await duo.chat()
    await duo.a.outage("")
    await half_open(duo)
    paying, broke = duo.org, await duo.gateway.new_org("0")
    # Its own key for another provider lets it past the door; for sim-a it has neither key nor credit.
    await admin.set_provider_key(duo.gateway.ledger.recorder, Sealer("m" * 32), broke["org_id"], "sim-b",
                                 "sk-own-sim-b-0123456789", providers=("sim-a", "sim-b"))
    await duo.gateway.ledger.follower.catch_up()
    duo.org = broke
    assert (await duo.chat()).status == 402 and await duo.a.count() == 2  # refused before sim-a was called
    duo.org = paying
    assert (await duo.chat()).headers["X-Gateway-Provider"] == "sim-a"  # the probe was still free


async def test_a_value_in_redis_that_is_not_a_time_is_ignored(make_duo, make_gateway, config, tmp_path, redis_url):
    client = aioredis.Redis.from_url(redis_url)
    await client.set("gw:circuit:sim-a", "not-a-time")
    await client.aclose()
    duo = await make_duo()
    with_redis = msgspec.structs.replace(config, redis=msgspec.structs.replace(config.redis, url=redis_url))
    duo.gateway = await make_gateway(duo_config(with_redis, duo.a, duo.b, tmp_path / "redis"))
    duo.org = await duo.gateway.new_org("10")
    assert (await duo.chat()).headers["X-Gateway-Provider"] == "sim-a"
