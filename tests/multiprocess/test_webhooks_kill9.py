"""Webhooks across crashes and replicas (issue 29), on SQLite and on PostgreSQL, with real
`gateway serve` processes and a real receiver that checks every signature on its own.

- A gateway SIGKILLed while a receiver holds its answer (so the send happened and its record did
  not) sends that message again after a restart under the same id; alerts raised while no gateway
  ran are delivered when one returns; each id arrives signed, in ledger order, and none is lost.
- Two replicas share one ledger: each alert arrives exactly once (one deliverer at a time); the
  first is SIGKILLed and the other takes the delivering over at once.
"""

import asyncio
import os
import signal
from contextlib import AsyncExitStack

import aiohttp

from gateway.accounts import admin
from ledger.backends import recorder_for
from tests.gateway.gateway_helpers import gateway_process, run_cli_async, write_config
from tests.gateway.webhooks.receiver import Receiver
from tests.support import PROVIDER_KEY, auth, chat_body, clean_env


async def on_ledger(url: str, act):
    recorder = recorder_for(url)
    await recorder.open()
    try:
        return await act(recorder)
    finally:
        await recorder.close()


def config_file(tmp_path, ledger_url: str, sim_url: str) -> str:
    return str(write_config(tmp_path, f"""
[ledger]
url = "{ledger_url}"
[providers.openai]
base_url = "{sim_url}/v1"
api_key = "{PROVIDER_KEY}"
[secrets]
master_key = "replicas-share-this-one"
[webhooks]
allowed_hosts = ["127.0.0.1"]
allow_http = true
poll_interval_s = 0.05
retry_first_s = 0.1
"""))


async def register(url: str, key: str, receiver: Receiver, threshold: str) -> None:
    async with aiohttp.ClientSession(url) as client:
        created = await client.post("/v1/webhooks", headers=auth(key), json={
            "url": receiver.url, "events": ["credits.added", "balance.low"], "balance_low_inr": threshold})
        assert created.status == 201, await created.text()
        receiver.secret = (await created.json())["secret"]


async def add_credits(ledger_url: str, org_id: str, amount: str) -> None:
    await on_ledger(ledger_url, lambda r: admin.add_credits(r, org_id, amount))


async def test_a_kill_between_send_and_record_repeats_that_id_and_loses_none(ledger_url, tmp_path, sim_url):
    receiver = Receiver()
    await receiver.start()
    org = await on_ledger(ledger_url, lambda r: admin.create_org(r, "hooks", "100"))
    config = config_file(tmp_path, ledger_url, sim_url)
    async with gateway_process("serve", "--port", "0", "--config", config, env=clean_env()) as served:
        await register(await served.ready_url(), org["api_key"], receiver, "106")
        receiver.hold_s = 3.0  # the delivery is in flight when the gateway dies
        await add_credits(ledger_url, org["org_id"], "1")
        await receiver.until(lambda r: len(r.got) == 1)
        os.killpg(served.proc.pid, signal.SIGKILL)
        await served.proc.wait()
    receiver.hold_s = 0.0
    await add_credits(ledger_url, org["org_id"], "2")  # raised while no gateway runs
    await add_credits(ledger_url, org["org_id"], "3")
    async with gateway_process("serve", "--port", "0", "--config", config, env=clean_env()) as served:
        url = await served.ready_url()
        await receiver.until(lambda r: len(r.ids()) == 3, timeout=20)
        async with aiohttp.ClientSession(url) as client:  # 106 -> just under: balance.low
            answer = await client.post("/v1/chat/completions", json=chat_body(), headers=auth(org["api_key"]))
            assert answer.status == 200
        await receiver.until(lambda r: len(r.ids()) == 4, timeout=20)
        await served.stop()
    first = receiver.got[0]["id"]
    assert [got["id"] for got in receiver.got].count(first) == 2  # sent, killed before its record, sent again
    assert len(receiver.got) == 5 and all(got["signed"] for got in receiver.got)
    bodies = {got["id"]: got["body"] for got in receiver.got}
    assert [(bodies[i]["type"], bodies[i]["data"].get("amount_inr")) for i in receiver.ids()] == [
        ("credits.added", "1"), ("credits.added", "2"), ("credits.added", "3"), ("balance.low", None)]
    verified = await run_cli_async("ledger", "verify", "--config", config)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    await receiver.stop()


async def test_one_replica_delivers_and_another_takes_over_when_it_dies(ledger_url, tmp_path, sim_url):
    receiver = Receiver()
    await receiver.start()
    org = await on_ledger(ledger_url, lambda r: admin.create_org(r, "hooks", "100"))
    config = config_file(tmp_path, ledger_url, sim_url)
    async with AsyncExitStack() as stack:
        first = await stack.enter_async_context(
            gateway_process("serve", "--port", "0", "--config", config, env=clean_env()))
        await register(await first.ready_url(), org["api_key"], receiver, "1")
        await add_credits(ledger_url, org["org_id"], "1")
        await receiver.until(lambda r: len(r.got) == 1)  # the first replica has the turn
        second = await stack.enter_async_context(
            gateway_process("serve", "--port", "0", "--config", config, env=clean_env()))
        await second.ready_url()
        for amount in ("2", "3"):
            await add_credits(ledger_url, org["org_id"], amount)
        await receiver.until(lambda r: len(r.got) == 3)
        await asyncio.sleep(0.5)  # time for a second deliverer, were there one, to repeat any
        assert len(receiver.got) == 3 == len(receiver.ids())  # two replicas, each alert once
        os.killpg(first.proc.pid, signal.SIGKILL)
        await first.proc.wait()
        await add_credits(ledger_url, org["org_id"], "4")
        await receiver.until(lambda r: len(r.ids()) == 4, timeout=20)
    assert [b["data"]["amount_inr"] for b in receiver.of_type("credits.added")] == ["1", "2", "3", "4"]
    assert all(got["signed"] for got in receiver.got)
    await receiver.stop()
