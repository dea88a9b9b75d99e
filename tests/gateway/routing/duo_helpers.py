"""What the routing tests share: the two simulators' driver, the catalogue and config that put one
model on both, each provider's prices and what a usage costs there."""

import copy
import json
from decimal import Decimal
from typing import Any

import aiohttp
import msgspec

from gateway.catalogue import SHIPPED_PATH
from gateway.config import Config, ProviderConfig
from tests.support import PROVIDER_KEY

# sim-b is the cheaper: `price` routing prefers it, `priority` (the catalogue's order) sim-a.
PRICES = {"sim-a": ("0.000003", "0.000004"), "sim-b": ("0.000001", "0.000002")}
RATE = Decimal("84.0")


def charge_at(provider: str, prompt_tokens: int, completion_tokens: int) -> int:
    """What `provider` charges for this usage, in INR nano-units (its catalogue price at RATE)."""
    prompt, completion = (Decimal(p) for p in PRICES[provider])
    return int((prompt * prompt_tokens + completion * completion_tokens) * RATE * 1_000_000_000)


class Sim:
    """A simulator instance, driven through its control routes: `outage` makes every provider call
    fail ("503", "429", "400"... answer that status; "hang" never answers; "drop" closes the
    connection unanswered; "" ends it), and its record says what it received."""

    def __init__(self, url: str, session: aiohttp.ClientSession) -> None:
        self.url, self._session = url, session

    async def outage(self, mode: str, retry_after: str | None = None) -> None:
        body = {"hang": True} if mode == "hang" else {"drop": True} if mode == "drop" else \
            {"status": int(mode), "retry_after": retry_after} if mode else {}
        async with self._session.post(f"{self.url}/_sim/outage", json=body) as response:
            assert response.status == 200, await response.text()

    async def records(self) -> list[dict]:
        async with self._session.get(f"{self.url}/_sim/requests") as response:
            return (await response.json())["data"]

    async def count(self) -> int:
        return len(await self.records())

    async def last(self) -> dict:
        return (await self.records())[-1]


def duo_catalogue(path) -> str:
    """`duo-chat`, `duo-embed`, `duo-realtime` (sim-a, then sim-b) and `duo-music` (their
    Google-speaking twins)."""
    shipped = {record["id"]: record for record in json.loads(SHIPPED_PATH.read_text())["data"]}

    def duo(source: str, name: str, providers: tuple[str, str]) -> dict:
        record = copy.deepcopy(shipped[source])
        entry = record["providers"][0]
        entries = [{**copy.deepcopy(entry), "providerId": provider} for provider in providers]
        if record["kind"] != "music":
            for provider_entry, provider in zip(entries, providers, strict=True):
                prompt, completion = PRICES[provider]
                provider_entry["pricing"].update(prompt=prompt, completion=completion)
        return {**record, "id": name, "aliases": [], "providers": entries}

    records = [duo("gpt-4o-mini", "duo-chat", ("sim-a", "sim-b")),
               duo("text-embedding-3-small", "duo-embed", ("sim-a", "sim-b")),
               duo("gpt-4o-realtime-preview", "duo-realtime", ("sim-a", "sim-b")),
               duo("tune-3-clip-preview", "duo-music", ("sim-a-google", "sim-b-google"))]
    path.write_text(json.dumps({"data": records}))
    return str(path)


def duo_config(config: Config, a: Sim, b: Sim, tmp_path, **routing: Any) -> Config:
    def provider(protocol: str, url: str, timeout_s: float = 5) -> ProviderConfig:
        return ProviderConfig(protocol=protocol, base_url=url, api_key=PROVIDER_KEY, timeout_s=timeout_s)
    tmp_path.mkdir(parents=True, exist_ok=True)
    providers = {**config.providers, "sim-a": provider("openai", f"{a.url}/v1", routing.pop("a_timeout_s", 5)),
                 "sim-b": provider("openai", f"{b.url}/v1"), "sim-a-google": provider("google", a.url),
                 "sim-b-google": provider("google", b.url)}
    secrets = msgspec.structs.replace(config.secrets, master_key=routing.pop("master_key", ""))
    routing_config = msgspec.structs.replace(config.routing, **{"failure_threshold": 2, "cooldown_s": 0.5, **routing})
    return msgspec.structs.replace(config, providers=providers, routing=routing_config, secrets=secrets,
                                   catalogue=msgspec.structs.replace(config.catalogue,
                                                                     path=duo_catalogue(tmp_path / "duo.json")))
