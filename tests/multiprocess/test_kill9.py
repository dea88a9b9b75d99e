"""kill -9 under load, a few rounds, on SQLite and on PostgreSQL: a real `gateway serve` takes
concurrent chats (plain and streamed) and is SIGKILLed mid-load, then started again. Every
request answered in full with a 200 has exactly one RequestCompleted with its request id,
nothing is recorded twice, each balance is its credits less the sum of its charges, and
`gateway ledger verify` passes after the last round (durable before acknowledged, DESIGN §3).
"""

import asyncio
import os
import signal

import aiohttp

from gateway.accounts import admin
from tests.gateway.gateway_helpers import gateway_process, run_cli_async, write_config
from ledger.backends import recorder_for
from tests.multiprocess.outage_helpers import (
    assert_every_charge_accounted_for, balance_matches_charges, chat_or_none, load,
)
from tests.support import PROVIDER_KEY, clean_env

ROUNDS = 3
CREDITS_INR = "1000"


async def new_org(url: str) -> dict:
    recorder = recorder_for(url)
    await recorder.open()
    try:
        return await admin.create_org(recorder, "kill9", CREDITS_INR)
    finally:
        await recorder.close()


async def ledger_state(url: str, org_id: str) -> tuple[list, int, int]:
    """Every recorded event, and the org's credits and balance as the projection has them."""
    recorder = recorder_for(url)
    await recorder.open(migrate=False)
    try:
        (credits, spent), = await recorder._fetch(
            "SELECT credits_inr_nano, spent_inr_nano FROM orgs WHERE org_id = ?", (org_id,))
        return await recorder.read(0, 100_000), credits, credits - spent
    finally:
        await recorder.close()


async def round_under_load(config: str, key: str, seconds: float) -> list:
    """Serve, load with concurrent chats for `seconds`, then SIGKILL the server mid-load."""
    async with gateway_process("serve", "--port", "0", "--config", config, env=clean_env()) as served:
        url = await served.ready_url()
        async with aiohttp.ClientSession(url, timeout=aiohttp.ClientTimeout(total=10)) as client:
            stop = asyncio.Event()
            traffic = asyncio.create_task(load(client, key, stop, clients=8, send=chat_or_none))
            await asyncio.sleep(seconds)
            os.killpg(served.proc.pid, signal.SIGKILL)  # the whole server, mid-request
            await served.proc.wait()
            stop.set()
            return await traffic


async def test_kill9_rounds_under_load_lose_and_duplicate_no_acknowledged_charge(ledger_url, tmp_path, sim_url):
    org = await new_org(ledger_url)
    config = str(write_config(tmp_path, f"""
[ledger]
url = "{ledger_url}"
[providers.openai]
base_url = "{sim_url}/v1"
api_key = "{PROVIDER_KEY}"
"""))
    answers = []
    for n in range(ROUNDS):
        answers += await round_under_load(config, org["api_key"], 0.6 + 0.3 * n)  # a different moment each round

    recorded, credits, balance = await ledger_state(ledger_url, org["org_id"])
    outcomes = assert_every_charge_accounted_for(answers, recorded)
    assert outcomes["charged"] >= 20, outcomes
    assert balance_matches_charges(recorded, org["org_id"], credits, balance)
    verified = await run_cli_async("ledger", "verify", "--config", config)
    assert verified.returncode == 0, verified.stdout + verified.stderr
