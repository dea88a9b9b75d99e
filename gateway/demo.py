"""`gateway demo`: the gateway on its embedded default, the simulator as every upstream."""

import asyncio
import sys
from pathlib import Path

import msgspec

from gateway.accounts import admin
from gateway import server
from gateway.app import ledger_recorder
from gateway.config import Config
from gateway.jsonio import loads
from ledger.signing import Signer

DEMO_CREDITS_INR = "1000"
DEMO_SIGNING_KEY = Path("data/demo-signing.pem")  # beside the demo's ledger, ./data/gateway.db
BANNER = """
Model gateway demo is running at {{url}}
  dashboard:          {{url}}/dashboard  (sign in with the demo key)
  upstream simulator: {sim}
  demo organization:  {org_id} (credits {credits} INR)
  demo API key:       {key}
  verify your bill:   {{url}}/v1/ledger/events (this key), /v1/ledger/checkpoints, /v1/ledger/public-key

Try it:
  curl {{url}}/v1/chat/completions -H 'Authorization: Bearer {key}' \\
    -H 'Content-Type: application/json' \\
    -d '{{{{"model": "gpt-4o-mini", "messages": [{{{{"role": "user", "content": "Hello"}}}}]}}}}'
Press Ctrl+C to stop.
"""


async def run(config: Config) -> None:
    simulator = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "simulator", "--host", "127.0.0.1", "--port", "0",
        stdout=asyncio.subprocess.PIPE)
    try:
        assert simulator.stdout is not None  # stdout=PIPE above
        sim_url = loads(await asyncio.wait_for(simulator.stdout.readline(), 30))["url"]
        config = with_signing_key(with_simulator(config, sim_url))
        org = await _create_demo_org(config)
        await server.serve(config, BANNER.format(sim=sim_url, credits=DEMO_CREDITS_INR,
                                                 org_id=org["org_id"], key=org["api_key"]))
    finally:
        if simulator.returncode is None:
            simulator.terminate()
        await simulator.wait()


def with_simulator(config: Config, sim_url: str) -> Config:
    """`config` with every provider pointed at the simulator."""
    providers = {name: msgspec.structs.replace(provider, api_key="sim-demo-key", headers={}, query={},
                                               base_url=f"{sim_url}/v1" if provider.protocol == "openai" else sim_url)
                 for name, provider in config.providers.items()}
    return msgspec.structs.replace(config, providers=providers)


def with_signing_key(config: Config) -> Config:
    """`config` signing checkpoints with the demo's key (made once, kept in data/), unless it has one."""
    if config.ledger.signing_key:
        return config
    if not DEMO_SIGNING_KEY.exists():
        DEMO_SIGNING_KEY.parent.mkdir(parents=True, exist_ok=True)
        Signer.written_to(DEMO_SIGNING_KEY)
    return msgspec.structs.replace(config, ledger=msgspec.structs.replace(config.ledger,
                                                                          signing_key=str(DEMO_SIGNING_KEY)))


async def _create_demo_org(config: Config) -> dict:
    recorder = ledger_recorder(config.ledger)
    await recorder.open()
    try:
        return await admin.create_org(recorder, "demo", DEMO_CREDITS_INR)
    finally:
        await recorder.close()
