"""What the Azure tests share: a gateway whose `azure` provider is the simulator on the v1 API or
the deployments path, api-key or Entra ID, and an operator catalogue of custom-named deployments."""

import json
from decimal import Decimal
from typing import Any

import msgspec

from gateway.catalogue import SHIPPED_PATH
from gateway.config import Config, ProviderConfig
from simulator.cloud_credentials import AZURE_API_KEY, AZURE_CLIENT_ID, AZURE_CLIENT_SECRET, AZURE_TENANT_ID

RATE = Decimal("84.0")
# The operator's models: each a shipped record served only by azure, under a deployment's name.
DEPLOYMENTS = {"my-gpt": ("gpt-4o-mini", "my-prod-gpt4o-mini"), "my-embed": ("text-embedding-3-small", "emb-deploy"),
               "my-tts": ("tts-1", "tts-deploy"), "my-whisper": ("whisper-1", "whisper-deploy")}
API_VERSION = "2024-10-21"


def azure_catalogue(path) -> str:
    """The shipped records of DEPLOYMENTS renamed, each with one azure entry (the shipped azure
    entry's prices for GPT-4o mini, the record's own otherwise) naming its deployment."""
    shipped = {record["id"]: record for record in json.loads(SHIPPED_PATH.read_text())["data"]}
    records = []
    for name, (source, deployment) in DEPLOYMENTS.items():
        record = shipped[source]
        entry = next((e for e in record["providers"] if e["providerId"] == "azure"), record["providers"][0])
        records.append({**record, "id": name, "aliases": [],
                        "providers": [{**entry, "providerId": "azure", "modelName": deployment}]})
    path.write_text(json.dumps({"data": records}))
    return str(path)


def azure_provider(sim_url: str, *, api_version: str = "", entra: bool = False, **options: Any) -> ProviderConfig:
    """The simulator as an Azure resource: the v1 API, or (`api_version`) the deployments path;
    with its api-key, or (`entra`) Entra ID client credentials issued by the simulator."""
    base_url = options.pop("base_url", f"{sim_url}/openai" if api_version else f"{sim_url}/openai/v1")
    credentials: dict[str, Any] = {"api_key": AZURE_API_KEY}
    if entra:
        credentials = {"tenant_id": AZURE_TENANT_ID, "client_id": AZURE_CLIENT_ID,
                       "client_secret": AZURE_CLIENT_SECRET, "authority_host": sim_url}
    return ProviderConfig(protocol="azure", base_url=base_url, api_version=api_version, timeout_s=5,
                          **{**credentials, **options})


def with_azure(config: Config, provider: ProviderConfig, tmp_path, *, attempts: int = 1) -> Config:
    """`config` with `provider` as `azure` and the operator's catalogue of deployments."""
    catalogue = msgspec.structs.replace(config.catalogue, path=azure_catalogue(tmp_path / "azure-catalogue.json"))
    routing = msgspec.structs.replace(config.routing, max_attempts=attempts)
    return msgspec.structs.replace(config, providers={**config.providers, "azure": provider}, catalogue=catalogue,
                                   routing=routing)


def price(model: str, field: str) -> Decimal:
    """The operator catalogue's USD price `field` of `model`'s azure entry (the record's, if absent)."""
    source, _ = DEPLOYMENTS[model]
    record = next(r for r in json.loads(SHIPPED_PATH.read_text())["data"] if r["id"] == source)
    entry = next((e for e in record["providers"] if e["providerId"] == "azure"), record["providers"][0])
    return Decimal(entry["pricing"].get(field) or record["pricing"].get(field) or "0")


def chat_cost_inr_nano(model: str, prompt: int, cached: int, completion: int) -> int:
    """What a chat usage costs at the azure entry's prices, cached prompt tokens at the cache-read price."""
    usd = ((prompt - cached) * price(model, "prompt") + cached * price(model, "input_cache_read")
           + completion * price(model, "completion"))
    return int(usd * RATE * 1_000_000_000)
