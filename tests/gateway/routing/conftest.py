"""One model served by two providers: two simulator instances, `sim-a` first and `sim-b` second,
each behind a switch the test throws to make it fail (and a count of the calls it received)."""

import asyncio
import copy
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import msgspec
import pytest
from aiohttp import web

from gateway.catalogue import SHIPPED_PATH
from gateway.config import Config, ProviderConfig
from ledger import audit
from ledger.events import RequestCompleted
from simulator.app import create_app as create_simulator
from simulator.settings import Settings
from duo_helpers import PRICES
from support import PROVIDER_KEY



class Switched:
    """A simulator whose provider calls fail as `mode` says: "" answers; "503", "500", "429",
    "400" answer that status; "hang" never answers; "drop" closes the connection unanswered."""

    def __init__(self) -> None:
        self.mode, self.retry_after, self.calls, self.url = "", "", 0, ""
        self.bodies: list[bytes] = []  # of every call, as received
        self.keys: list[str] = []  # the Authorization each call carried

    @web.middleware
    async def middleware(self, request: web.Request, handler: Callable) -> web.StreamResponse:
        self.calls += 1
        self.bodies.append(await request.read())  # read once, kept for the handler too
        self.keys.append(request.headers.get("Authorization", ""))
        match self.mode:
            case "":
                return await handler(request)
            case "hang":
                await asyncio.sleep(3600)
            case "drop":
                assert request.transport is not None
                request.transport.abort()
                await asyncio.sleep(0.05)
        headers = {"Retry-After": self.retry_after} if self.retry_after else {}
        return web.json_response({"error": {"message": f"simulated {self.mode}", "type": "server_error"}},
                                 status=int(self.mode), headers=headers)


@pytest.fixture
def make_sim(aiohttp_server) -> Callable:
    async def start(**settings: Any) -> Switched:
        switched = Switched()
        app = create_simulator(Settings(**settings))
        app.middlewares.append(switched.middleware)
        switched.url = str((await aiohttp_server(app)).make_url("")).rstrip("/")
        return switched
    return start


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

    def __init__(self, gateway, a: Switched, b: Switched, org: dict) -> None:
        self.gateway, self.a, self.b, self.org = gateway, a, b, org

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.org['api_key']}"}

    async def chat(self, text: str = "hello", *, model: str = "duo-chat", **extra: Any):
        body = {"model": model, "messages": [{"role": "user", "content": text}], **extra}
        return await self.gateway.client.post("/v1/chat/completions", json=body, headers=self.headers)

    async def completed_route(self, route: str) -> list[RequestCompleted]:
        return [e.event for e in await self.gateway.events()
                if isinstance(e.event, RequestCompleted) and e.event.route == route]

    async def completed(self, request_id: str) -> list[RequestCompleted]:
        return [e.event for e in await self.gateway.events()
                if isinstance(e.event, RequestCompleted) and e.event.request_id == request_id]


def duo_config(config: Config, a: Switched, b: Switched, tmp_path, **routing: Any) -> Config:
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
