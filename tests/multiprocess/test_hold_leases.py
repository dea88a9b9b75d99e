"""A killed gateway's holds come back within a lease (issue 24): two `gateway serve` processes on
one ledger (a SQLite file, or a PostgreSQL schema), the first holding escrow slices and its slow
requests' holds when it is killed with SIGKILL. The survivor (or nobody, at first) renews none of
the dead one's holds; once they lapse, the survivor's expiry pass releases them, so the org and
the key get their credit back and the key answers 200 again, with the ledger verifying.
"""

import asyncio
import contextlib
import signal
import time
from decimal import Decimal

import aiohttp
import pytest

from gateway.app import ledger_recorder
from gateway.config import LedgerConfig
from ledger.events import HoldReleased
from tests.gateway.gateway_helpers import (
    admin_cli, gateway_process, run_cli_async, simulator_providers_toml, write_config,
)
from tests.support import auth, chat_body, clean_env, decimal_json

LEASE_S = 2


@pytest.fixture
def leased_config(tmp_path, ledger_url, sim_url) -> str:
    return str(write_config(tmp_path, f'[ledger]\nurl = "{ledger_url}"\n[billing]\nhold_lease_s = {LEASE_S}\n'
                                      f'escrow_idle_s = 1\n{simulator_providers_toml(sim_url)}'))


async def post(session: aiohttp.ClientSession, url: str, key: str, body: dict) -> int:
    with contextlib.suppress(aiohttp.ClientError, asyncio.TimeoutError):
        async with session.post(f"{url}/v1/chat/completions", json=body, headers=auth(key),
                                timeout=aiohttp.ClientTimeout(total=30)) as response:
            await response.read()
            return response.status
    return 0  # the process died under it


async def reserved(session: aiohttp.ClientSession, url: str, admin_key: str, key_id: str) -> Decimal:
    listed = decimal_json(await (await session.get(f"{url}/v1/keys", headers=auth(admin_key))).read())
    return Decimal(str(next(item for item in listed["data"] if item["id"] == key_id)["reserved_inr"]))


async def test_a_killed_process_holds_come_back_within_a_lease_and_the_key_works_again(leased_config, ledger_url):
    org = await admin_cli(leased_config, "create-org", "acme", "--credits-inr", "1000")
    key = await admin_cli(leased_config, "create-key", org["org_id"])
    await admin_cli(leased_config, "set-key-limits", key["key_id"], "--budget-inr", "20")
    async with gateway_process("serve", "--port", "0", "--config", leased_config, env=clean_env()) as doomed, \
            gateway_process("serve", "--port", "0", "--config", leased_config, env=clean_env()) as survivor, \
            aiohttp.ClientSession() as session:
        doomed_url, survivor_url = await doomed.ready_url(), await survivor.ready_url()
        for n in range(6):  # demand, so the doomed process takes slices of the org and of the key
            assert await post(session, doomed_url, key["api_key"], chat_body(f"warm {n}", max_tokens=400)) == 200
        slow = [asyncio.create_task(post(session, doomed_url, key["api_key"], chat_body(
            f"slow {n} [sim:tokens=400] [sim:tps=20]", max_tokens=400))) for n in range(24)]
        await asyncio.sleep(1.0)  # every slow request admitted or held, none finished
        assert await reserved(session, survivor_url, org["api_key"], key["key_id"]) > 0
        doomed.proc.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        assert set(await asyncio.gather(*slow)) <= {0, 200}
        back = await _reserved_back_to_zero(session, survivor_url, org["api_key"], key["key_id"])
        took = time.monotonic() - killed
        print(f"held credit back {took:.1f} s after SIGKILL (lease {LEASE_S} s)")
        assert back == 0 and took < LEASE_S + 8
        assert await post(session, survivor_url, key["api_key"], chat_body("alive again")) == 200
        metrics = await (await session.get(f"{survivor_url}/metrics")).text()
        expired = [line for line in metrics.splitlines() if line.startswith("gateway_holds_expired_total")]
        assert expired and float(expired[0].split()[-1]) >= 2  # the dead one's slices and holds
        assert await survivor.stop(signal.SIGTERM) == 0
    balance = await admin_cli(leased_config, "balance", org["org_id"])
    assert balance["balance_inr"] > 0
    verified = await run_cli_async("ledger", "verify", "--config", leased_config)
    assert verified.returncode == 0, verified.stderr
    recorder = ledger_recorder(LedgerConfig(url=ledger_url))
    await recorder.open()
    try:  # the dead process's slices and request holds were expired, and nothing else was
        expired = [r.event for r in await recorder.read(0, 100_000) if isinstance(r.event, HoldReleased)
                   and r.event.expired]
        assert {e.hold_id.partition("_")[0] for e in expired} == {"slice", "hold"}
        assert await recorder._fetch("SELECT * FROM holds") == []
    finally:
        await recorder.close()


async def _reserved_back_to_zero(session, url: str, admin_key: str, key_id: str) -> Decimal:
    deadline = time.monotonic() + LEASE_S + 10
    while (amount := await reserved(session, url, admin_key, key_id)) != 0 and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    return amount
