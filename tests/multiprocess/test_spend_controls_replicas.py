"""Key budgets hold exactly across replicas (issue 17): two `gateway serve` processes on one
ledger, SQLite file or PostgreSQL schema, set up the way an operator does it (the CLI's
create-org, create-key and set-key-limits), and clients hammering both at once.

Music's flat price is its worst case, so a budget of K prices lets exactly K of 64 concurrent
generations through, however the two processes interleave. Chats hold more than they cost (their
worst case), so there the check is the one a user makes: the sum charged never passes the
budget, the balance never goes below zero, every refusal names its limit. Skipped locally when
no PostgreSQL listens on 127.0.0.1:5432; a failure under CI=true.
"""

import asyncio
import contextlib
import signal
from decimal import Decimal

from types import SimpleNamespace

import aiohttp
import pytest

from gateway.billing import ceilings
from gateway.catalogue import Catalogue
from gateway.config import Config
from gateway.providers.openai import adapter as openai

from tests.gateway.gateway_helpers import (
    admin_cli, gateway_process, run_cli_async, simulator_providers_toml, write_config,
)
from tests.support import auth, chat_body, clean_env, decimal_json

PRICE_INR = Decimal("0.05") * 84  # one tune-3-clip-preview generation at the default rate


@pytest.fixture
def replica_config(tmp_path, ledger_url, sim_url) -> str:
    return str(write_config(tmp_path, f'[ledger]\nurl = "{ledger_url}"\n{simulator_providers_toml(sim_url)}'))


@contextlib.asynccontextmanager
async def two_replicas(config: str):
    async with gateway_process("serve", "--port", "0", "--config", config, env=clean_env()) as first, \
            gateway_process("serve", "--port", "0", "--config", config, env=clean_env()) as second:
        yield [await first.ready_url(), await second.ready_url()]
        assert await first.stop(signal.SIGTERM) == 0 and await second.stop(signal.SIGTERM) == 0


async def post(session: aiohttp.ClientSession, url: str, key: str, path: str, body: dict) -> tuple[int, dict, str]:
    async with session.post(f"{url}{path}", json=body, headers=auth(key)) as response:
        return response.status, decimal_json(await response.read()), response.headers.get("X-Gateway-Charged-INR", "0")


async def test_a_key_budget_holds_exactly_across_two_processes(replica_config):
    org = await admin_cli(replica_config, "create-org", "acme", "--credits-inr", "1000")
    key = await admin_cli(replica_config, "create-key", org["org_id"], "--name", "limited")
    limits = await admin_cli(replica_config, "set-key-limits", key["key_id"], "--budget-inr", str(PRICE_INR * 5),
                       "--budget-period", "month", "--models", "tune-3-clip-preview,openai/*")
    assert (limits["budget_period"], limits["models"]) == ("month", ["tune-3-clip-preview", "openai/*"])
    async with two_replicas(replica_config) as urls, aiohttp.ClientSession() as session:
        music = await asyncio.gather(*(post(session, urls[n % 2], key["api_key"], "/v1/music", {
            "model": "tune-3-clip-preview", "prompt": f"tune {n}"}) for n in range(64)))
        assert [status for status, _, _ in music].count(200) == 5
        assert all(body["error"]["code"] == "key_budget_exceeded" and "resets at" in body["error"]["message"]
                   for status, body, _ in music if status != 200)
        listed = await (await session.get(f"{urls[1]}/v1/keys", headers=auth(org["api_key"]))).json()
    item = next(item for item in listed["data"] if item["id"] == key["key_id"])
    assert Decimal(str(item["spent_inr"])) == PRICE_INR * 5 and item["reserved_inr"] == 0
    assert (await admin_cli(replica_config, "balance", org["org_id"]))["balance_inr"] == 1000 - PRICE_INR * 5
    verified = await run_cli_async("ledger", "verify", "--config", replica_config)
    assert verified.returncode == 0, verified.stderr


async def test_concurrent_clients_on_two_replicas_never_spend_past_a_small_budget(replica_config):
    org = await admin_cli(replica_config, "create-org", "acme", "--credits-inr", "0.2")
    key = await admin_cli(replica_config, "create-key", org["org_id"])
    await admin_cli(replica_config, "set-key-limits", key["key_id"], "--budget-inr", "0.03", "--budget-period", "day")
    async with two_replicas(replica_config) as urls, aiohttp.ClientSession() as session:
        answers = await asyncio.gather(*(post(session, urls[n % 2], key["api_key"], "/v1/chat/completions",
                                              chat_body(f"q{n} [sim:tokens=40]", max_tokens=60)) for n in range(60)))
        by_org_key = await asyncio.gather(*(post(session, urls[n % 2], org["api_key"], "/v1/chat/completions",
                                                 chat_body(f"o{n} [sim:tokens=40]")) for n in range(60)))
    charged = sum(Decimal(c) for status, _, c in answers if status == 200)
    assert 0 < charged <= Decimal("0.03")
    assert all(body["error"]["code"] == "key_budget_exceeded" for status, body, _ in answers if status != 200)
    assert {status for status, _, _ in by_org_key} <= {200, 402}
    assert all(body["error"]["code"] == "insufficient_credits" for status, body, _ in by_org_key if status != 200)
    balance = (await admin_cli(replica_config, "balance", org["org_id"]))["balance_inr"]
    assert balance >= 0 and balance == Decimal("0.2") - charged - sum(
        Decimal(c) for status, _, c in by_org_key if status == 200)
    verified = await run_cli_async("ledger", "verify", "--config", replica_config)
    assert verified.returncode == 0, verified.stderr


async def test_64_slow_chats_against_a_budget_of_k_worst_cases_let_exactly_k_in(replica_config):
    # Slow answers (nearly three seconds each), so every request has reserved its worst case before any
    # settles: exactly K of the identical bodies fit, whichever process each reaches.
    body = chat_body("the same question [sim:tokens=8] [sim:tps=3]", max_tokens=40)
    mini = Catalogue.load().resolve("gpt-4o-mini")
    worst = ceilings.worst(SimpleNamespace(config=Config()), mini, ceilings.prompt_bound(mini, body),
                           openai.chat_allowance(body))
    org = await admin_cli(replica_config, "create-org", "acme", "--credits-inr", "1000")
    key = await admin_cli(replica_config, "create-key", org["org_id"])
    await admin_cli(replica_config, "set-key-limits", key["key_id"], "--budget-inr", str(Decimal(worst * 6) / 10**9))
    async with two_replicas(replica_config) as urls, aiohttp.ClientSession() as session:
        answers = await asyncio.gather(*(post(session, urls[n % 2], key["api_key"], "/v1/chat/completions", body)
                                         for n in range(64)))
    assert sorted(status for status, _, _ in answers) == [200] * 6 + [402] * 58
    assert sum(Decimal(c) for status, _, c in answers if status == 200) <= Decimal(worst * 6) / 10**9
