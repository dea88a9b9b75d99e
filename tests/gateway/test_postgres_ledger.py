"""The gateway on a PostgreSQL ledger: the same behaviour as on the embedded SQLite default.

Skipped locally when no PostgreSQL listens on 127.0.0.1:5432; a failure under CI=true.
"""

import asyncio
from decimal import Decimal

import pytest

from ledger import audit
from tests.support import auth, chat_body, request_events

@pytest.fixture
async def pg_gateway(make_pg_gateway, config):
    return await make_pg_gateway(config)


async def test_chat_is_billed_exactly_and_the_ledger_verifies(pg_gateway):
    assert type(pg_gateway.ledger.recorder).__name__ == "PostgresRecorder"
    org = await pg_gateway.new_org("100")
    responses = await asyncio.gather(*(pg_gateway.client.post(
        "/v1/chat/completions", json=chat_body(stream=n % 2 == 0), headers=auth(org["api_key"]))
        for n in range(20)))
    assert [r.status for r in responses] == [200] * 20
    charged = sum(e.charged_inr_nano for e in await request_events(pg_gateway))
    assert await pg_gateway.balance(org["org_id"]) == Decimal(100) - Decimal(charged) / 10**9
    assert (await audit.verify(pg_gateway.ledger.recorder))[1] == []
    health = await (await pg_gateway.client.get("/")).json()
    assert health["health"]["database"]["connected"] is True


async def test_music_holds_never_overspend_on_postgres(pg_gateway):
    org = await pg_gateway.new_org(str(Decimal("0.05") * 84 * 3))  # exactly three clip generations
    body = {"model": "tune-3-clip-preview", "prompt": "calm piano"}
    responses = await asyncio.gather(*(pg_gateway.client.post("/v1/music", json=body, headers=auth(org["api_key"]))
                                       for _ in range(8)))
    assert sorted(r.status for r in responses) == [200] * 3 + [402] * 5
    assert await pg_gateway.balance(org["org_id"]) == 0
    assert (await audit.verify(pg_gateway.ledger.recorder))[1] == []
