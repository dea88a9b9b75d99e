"""One model served by two providers: two simulator instances, `sim-a` first and `sim-b` second,
each put into an outage by the test through its own control route (`POST /_sim/outage`)."""

import copy
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import msgspec
import pytest

from gateway.catalogue import SHIPPED_PATH
from gateway.config import Config, ProviderConfig
from ledger import audit
from ledger.events import RequestCompleted
from simulator.app import create_app as create_simulator
from simulator.settings import Settings
from duo_helpers import PRICES
from support import PROVIDER_KEY



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


@pytest.fixture
async def make_sim(aiohttp_server) -> AsyncIterator[Callable]:
    async with aiohttp.ClientSession() as session:
        async def start(**settings: Any) -> Sim:
            server = await aiohttp_server(create_simulator(Settings(**settings)))
            return Sim(str(server.make_url("")).rstrip("/"), session)
        yield start


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


class Duo:
    """A gateway in front of sims `a` and `b`, an org with credits, and what to check after."""

    def __init__(self, gateway, a: Sim, b: Sim, org: dict) -> None:
        self.gateway, self.a, self.b, self.org = gateway, a, b, org

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.org['api_key']}"}

    async def calls(self) -> tuple[int, int]:
        """How many provider calls sim-a and sim-b have received."""
        return await self.a.count(), await self.b.count()

    async def chat(self, text: str = "hello", *, model: str = "duo-chat", **extra: Any):
        body = {"model": model, "messages": [{"role": "user", "content": text}], **extra}
        return await self.gateway.client.post("/v1/chat/completions", json=body, headers=self.headers)

    async def completed_route(self, route: str) -> list[RequestCompleted]:
        return [e.event for e in await self.gateway.events()
                if isinstance(e.event, RequestCompleted) and e.event.route == route]

    async def completed(self, request_id: str) -> list[RequestCompleted]:
        return [e.event for e in await self.gateway.events()
                if isinstance(e.event, RequestCompleted) and e.event.request_id == request_id]


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


@pytest.fixture
async def make_duo(make_gateway, make_sim, config, tmp_path) -> AsyncIterator[Callable]:
    """`await make_duo(**routing)`: a Duo whose gateway has these [routing] keys (and `a_timeout_s`,
    sim-a's timeout); every ledger it made verifies after the test."""
    made: list[Duo] = []

    async def start(a_settings: dict | None = None, **routing: Any) -> Duo:
        a, b = await make_sim(**(a_settings or {})), await make_sim()
        gateway = await make_gateway(duo_config(config, a, b, tmp_path, **routing))
        made.append(Duo(gateway, a, b, await gateway.new_org("100")))
        return made[-1]

    yield start
    for duo in made:
        assert (await audit.verify(duo.gateway.ledger.recorder))[1] == []


@pytest.fixture
async def duo(make_duo) -> Duo:
    return await make_duo()
