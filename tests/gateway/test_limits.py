"""Per-key rate limits: requests and tokens per minute, shared through Redis by every replica,
per process without it; Redis failing lets requests through (fail open)."""

import msgspec
import pytest

from gateway.accounts import admin
from gateway.accounts.limits import window
from tests.support import auth, chat_body, need_service

REDIS_URL = "redis://127.0.0.1:6379/15"


def limited(config, redis_url: str = "", **limits):
    return msgspec.structs.replace(config, limits=msgspec.structs.replace(config.limits, **limits),
                                   redis=msgspec.structs.replace(config.redis, url=redis_url))


async def chat(gateway, key: str, text: str = "hi [sim:tokens=4]"):
    response = await gateway.client.post("/v1/chat/completions", json=chat_body(text), headers=auth(key))
    await response.read()
    return response


@pytest.fixture
async def redis_db():
    need_service("127.0.0.1", 6379, "Redis")
    from redis.asyncio import Redis

    redis = Redis.from_url(REDIS_URL)
    await redis.flushdb()
    yield redis
    await redis.flushdb()
    await redis.aclose()


async def test_requests_past_the_default_limit_are_429_with_retry_after(make_gateway, config):
    gateway = await make_gateway(limited(config, requests_per_minute=3))
    org = await gateway.new_org("100")
    statuses = [(await chat(gateway, org["api_key"])).status for _ in range(3)]
    refused = await chat(gateway, org["api_key"])
    assert statuses == [200, 200, 200] and refused.status == 429
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    assert (await refused.json())["error"]["type"] == "rate_limit_exceeded"


async def test_a_keys_own_limits_override_the_defaults(make_gateway, config):
    gateway = await make_gateway(limited(config, requests_per_minute=1))
    org = await gateway.new_org("100")
    await admin.set_key_limits(gateway.ledger.recorder, org["key_id"], 0, 0)  # unlimited for this key
    await gateway.ledger.follower.catch_up()
    assert [(await chat(gateway, org["api_key"])).status for _ in range(4)] == [200] * 4


async def test_tokens_per_minute_stop_a_key_once_its_window_is_spent(make_gateway, config):
    gateway = await make_gateway(config)
    org = await gateway.new_org("100")
    await admin.set_key_limits(gateway.ledger.recorder, org["key_id"], 0, 10)
    await gateway.ledger.follower.catch_up()
    first = await chat(gateway, org["api_key"], "hi [sim:tokens=12]")  # admitted: nothing spent yet
    assert first.status == 200
    refused = await chat(gateway, org["api_key"])
    assert refused.status == 429 and "tokens" in (await refused.json())["error"]["message"]


async def test_with_redis_two_gateways_share_one_limit(make_gateway, config, redis_db):
    shared = limited(config, REDIS_URL, requests_per_minute=3)
    first, second = await make_gateway(shared), await make_gateway(shared)
    org = await first.new_org("100")
    await second.ledger.follower.catch_up()
    statuses = [(await chat(gateway, org["api_key"])).status for gateway in (first, second, first, second)]
    assert statuses == [200, 200, 200, 429]


async def test_redis_down_fails_open(make_gateway, config):
    gateway = await make_gateway(limited(config, "redis://127.0.0.1:1/0", requests_per_minute=1))
    org = await gateway.new_org("100")
    assert [(await chat(gateway, org["api_key"])).status for _ in range(3)] == [200] * 3


def test_windows_are_whole_minutes():
    assert window(120.0) == (2, 60) and window(179.5) == (2, 1) and window(150.2) == (2, 30)
