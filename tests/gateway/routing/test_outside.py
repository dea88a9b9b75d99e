"""From outside, as an operator runs it: `gateway serve` in front of two simulator processes that
serve one model, one of them in an outage. Clients (the openai SDK) see 200s from the healthy
provider, each charged once at its price; a stream that began is never sent twice; music still
calls upstream once; the ledger verifies."""

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from decimal import Decimal

import aiohttp
import openai
import orjson

from tests.gateway.routing.duo_helpers import duo_catalogue
from tests.gateway.gateway_helpers import gateway_process, run_cli_async, write_config
from tests.support import PROVIDER_KEY, clean_env, decimal_json


@contextlib.asynccontextmanager
async def simulator_process(*args: str) -> AsyncIterator[str]:
    process = await asyncio.create_subprocess_exec(sys.executable, "-m", "simulator", "--port", "0", *args,
                                                   stdout=asyncio.subprocess.PIPE)
    try:
        assert process.stdout is not None
        yield orjson.loads(await asyncio.wait_for(process.stdout.readline(), 15))["url"]
    finally:
        process.terminate()
        await process.wait()


async def provider_calls(session: aiohttp.ClientSession, sim: str) -> list[dict]:
    async with session.get(f"{sim}/_sim/requests") as response:
        return (await response.json())["data"]


def providers_toml(**sims: str) -> str:
    tables = []
    for name, url in sims.items():
        for suffix, protocol, base in (("", "openai", f"{url}/v1"), ("-google", "google", url)):
            tables.append(f'[providers.{name}{suffix}]\nprotocol = "{protocol}"\nbase_url = "{base}"\n'
                          f'api_key = "{PROVIDER_KEY}"\ntimeout_s = 5\n')
    return "\n".join(tables)


async def test_one_model_on_two_simulator_processes_one_of_them_down(tmp_path):
    async with simulator_process("--outage", "503") as down, simulator_process() as healthy:
        config = write_config(tmp_path, f'[ledger]\nurl = "sqlite:///{tmp_path}/ledger.db"\n'
                                        f'[catalogue]\npath = "{duo_catalogue(tmp_path / "duo.json")}"\n'
                                        f'[routing]\nfailure_threshold = 2\n' + providers_toml(**{"sim-a": down,
                                                                                               "sim-b": healthy}))
        org = decimal_json((await run_cli_async("admin", "create-org", "outside", "--credits-inr", "50",
                                                "--config", str(config))).stdout.encode())
        async with gateway_process("serve", "--port", "0", "--config", str(config), env=clean_env()) as gateway:
            url = await gateway.ready_url()
            client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key=org["api_key"], max_retries=0)
            charged = Decimal(0)
            for n in range(4):
                raw = await client.chat.completions.with_raw_response.create(
                    model="duo-chat", messages=[{"role": "user", "content": f"hello {n}"}])
                assert raw.status_code == 200 and raw.headers["X-Gateway-Provider"] == "sim-b"
                charged += Decimal(raw.headers["X-Gateway-Charged-INR"])
            stream = await client.chat.completions.create(
                model="duo-chat", stream=True, messages=[{"role": "user", "content": "cut [sim:drop_after=2]"}])
            with contextlib.suppress(openai.APIError):
                async for _ in stream:
                    pass
            async with aiohttp.ClientSession() as session:
                music = await session.post(f"{url}/v1/music", json={"model": "duo-music", "prompt": "a tune"},
                                           headers={"Authorization": f"Bearer {org['api_key']}"})
                assert music.status == 502
                down_calls, healthy_calls = await provider_calls(session, down), await provider_calls(session, healthy)
            assert await gateway.stop() == 0
        cut = [c for c in healthy_calls if "sim:drop_after" in str(c["body"])]
        assert len(cut) == 1  # the stream that had begun was not sent again
        assert [c["path"] for c in down_calls].count("/v1beta/models/tune-3-clip-preview:generateContent") == 1
        assert not any("/v1beta/" in c["path"] for c in healthy_calls)  # music never failed over
        assert len(down_calls) == 3  # two chats opened its circuit; the music call
        balance = decimal_json((await run_cli_async("admin", "balance", org["org_id"], "--config",
                                                    str(config))).stdout.encode())
        assert Decimal(balance["balance_inr"]) == 50 - charged > 0  # every 200 charged once at its header's price
        assert (await run_cli_async("ledger", "verify", "--config", str(config))).returncode == 0
