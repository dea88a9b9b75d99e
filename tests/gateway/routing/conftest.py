"""One model served by two providers: two simulator instances, `sim-a` first and `sim-b` second,
each put into an outage by the test through its own control route (`POST /_sim/outage`)."""

from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest

from ledger import audit
from ledger.events import RequestCompleted
from simulator.app import create_app as create_simulator
from simulator.settings import Settings
from tests.gateway.routing.duo_helpers import Sim, duo_config


@pytest.fixture
async def make_sim(aiohttp_server) -> AsyncIterator[Callable]:
    async with aiohttp.ClientSession() as session:
        async def start(**settings: Any) -> Sim:
            server = await aiohttp_server(create_simulator(Settings(**settings)))
            return Sim(str(server.make_url("")).rstrip("/"), session)
        yield start


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
