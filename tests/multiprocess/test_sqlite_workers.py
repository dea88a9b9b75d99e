"""`gateway serve --workers 2` on one SQLite file (issue 13): both workers write the ledger at
once, and admin commands write it beside them; afterwards every 200 has exactly one charge,
nothing is recorded twice, positions are gapless, each balance is its credits less its
charges, and `gateway ledger verify` passes."""

import asyncio
import signal

import aiohttp

from tests.gateway.gateway_helpers import gateway_process, json_lines, ledger_toml, run_cli_async, write_config
from ledger.events import CreditsAdded
from ledger.backends.sqlite import SQLiteRecorder
from tests.multiprocess.outage_helpers import assert_every_charge_accounted_for, balance_matches_charges, load
from tests.support import PROVIDER_KEY, clean_env, decimal_json


async def cli_json(*args: str) -> dict:
    result = await run_cli_async(*args)
    assert result.returncode == 0, result.stderr
    return decimal_json(result.stdout.encode())


async def test_two_sqlite_workers_and_admin_commands_lose_and_duplicate_nothing(tmp_path, sim_url):
    db = tmp_path / "ledger.db"
    config = str(write_config(tmp_path, ledger_toml(db)))
    orgs = [await cli_json("admin", "create-org", f"org{n}", "--credits-inr", "100", "--config", config)
            for n in range(2)]
    env = clean_env(GATEWAY_PROVIDERS_OPENAI_BASE_URL=f"{sim_url}/v1", GATEWAY_PROVIDERS_OPENAI_API_KEY=PROVIDER_KEY)
    async with gateway_process("serve", "--port", "0", "--workers", "2", "--config", config, env=env) as served:
        url = await served.wait_for_output(lambda _out, err: next(
            (line["url"] for line in json_lines(err) if line.get("event") == "gateway_ready" and "workers" in line),
            None))
        stop = asyncio.Event()
        # Many connections, which the kernel spreads over both workers' sockets.
        async with aiohttp.ClientSession(url, timeout=aiohttp.ClientTimeout(total=30)) as client:
            traffic = [asyncio.create_task(load(client, org["api_key"], stop, clients=8)) for org in orgs]
            for n in range(3):  # the admin CLI writes while both workers do
                await cli_json("admin", "add-credits", orgs[n % 2]["org_id"], "1", "--config", config)
            await asyncio.sleep(0.5)
            stop.set()
            answers = [answer for task in traffic for answer in await task]
        assert await served.stop(signal.SIGTERM) == 0
    workers = {line["worker"] for line in json_lines(served.stderr) if line.get("event") == "request"}
    assert len(workers) == 2, "both workers served (and so wrote) requests"

    recorder = SQLiteRecorder(str(db))
    await recorder.open(migrate=False)
    try:
        recorded = await recorder.read(0, 100_000)
        assert [r.position for r in recorded] == list(range(1, len(recorded) + 1))
        outcomes = assert_every_charge_accounted_for(answers, recorded)
        assert outcomes["charged"] == len(answers) >= 40, outcomes  # no outage here: every answer is a 200
        assert sum(isinstance(r.event, CreditsAdded) for r in recorded) == 2 + 3
        for org in orgs:
            [(credits, spent)] = await recorder._fetch(
                "SELECT credits_inr_nano, spent_inr_nano FROM orgs WHERE org_id = ?", (org["org_id"],))
            assert balance_matches_charges(recorded, org["org_id"], credits, credits - spent)
    finally:
        await recorder.close()
    verified = await run_cli_async("ledger", "verify", "--config", config)
    assert verified.returncode == 0, verified.stdout + verified.stderr
