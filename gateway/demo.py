"""`gateway demo`: the gateway on its embedded default, the simulator as every upstream."""

import asyncio
import sys
from pathlib import Path

import msgspec

from gateway.accounts import admin
from gateway import server
from gateway.app import ledger_recorder
from gateway.config import Config, ProviderConfig
from gateway.jsonio import encode, loads
from ledger.signing import Signer

DEMO_CREDITS_INR = "1000"
DEMO_SIGNING_KEY = Path("data/demo-signing.pem")  # beside the demo's ledger, ./data/gateway.db
DEMO_SERVICE_ACCOUNT = Path("data/demo-service-account.json")  # the simulator's Vertex test account
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
        ready = loads(await asyncio.wait_for(simulator.stdout.readline(), 30))
        config = with_signing_key(with_simulator(config, ready["url"], ready.get("clouds") or {}))
        org = await _create_demo_org(config)
        await server.serve(config, BANNER.format(sim=ready["url"], credits=DEMO_CREDITS_INR,
                                                 org_id=org["org_id"], key=org["api_key"]))
    finally:
        if simulator.returncode is None:
            simulator.terminate()
        await simulator.wait()


def with_simulator(config: Config, sim_url: str, clouds: dict | None = None) -> Config:
    """`config` with every provider pointed at the simulator, the clouds with the credentials
    it checks (`clouds`, from its readiness line: Azure's api-key, a service account)."""
    providers = {name: at_simulator(provider, sim_url, clouds or {}) for name, provider in config.providers.items()}
    return msgspec.structs.replace(config, providers=providers)


def at_simulator(provider: ProviderConfig, sim_url: str, clouds: dict) -> ProviderConfig:
    """One provider at the simulator, as its protocol reaches it there."""
    demo = msgspec.structs.replace(provider, api_key="sim-demo-key", headers={}, query={}, base_url=sim_url)
    match provider.protocol:
        case "openai":
            return msgspec.structs.replace(demo, base_url=f"{sim_url}/v1")
        case "azure":
            return msgspec.structs.replace(demo, base_url=f"{sim_url}/openai/v1", api_version="",
                                           api_key=clouds.get("azure_api_key", ""), tenant_id="", client_id="",
                                           client_secret="")
        case "vertex" if "service_account" in clouds:
            DEMO_SERVICE_ACCOUNT.parent.mkdir(parents=True, exist_ok=True)
            DEMO_SERVICE_ACCOUNT.write_bytes(encode(clouds["service_account"]))
            return msgspec.structs.replace(demo, api_key="", credentials_file=str(DEMO_SERVICE_ACCOUNT),
                                           project=clouds["service_account"].get("project_id", ""))
    return demo


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
