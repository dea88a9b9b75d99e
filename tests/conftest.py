"""Shared fixtures: the real simulator and the real gateway, each on a real socket."""

import contextlib
from decimal import Decimal
from typing import Any

import msgspec
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from gateway.accounts import admin
from gateway.app import create_app
from gateway.config import Config, ProviderConfig
from gateway.edge.state import LEDGER
from ledger.money import from_nano
from tests.support import S3_CREDENTIALS, cloud_provider, postgres_schema, postgres_url
from simulator.app import create_app as create_simulator
from simulator.settings import Settings
from tests.tcp_proxy import proxied_service
from tests.gateway.webhooks.receiver import Receiver


# -- the simulator on its own, for its tests ---------------------------------------------------

class NonCancellingTestServer(TestServer):
    """A TestServer that, like `python -m simulator`, leaves handler_cancellation off.

    aiohttp's TestServer always turns it on, so without this the simulator's own
    disconnect detection (polling the transport) would never be exercised.
    """

    async def _make_runner(self, **kwargs: Any) -> web.AppRunner:
        return await super()._make_runner(**{**kwargs, "handler_cancellation": False})


@pytest.fixture
def make_client(aiohttp_client):
    async def make(*, handler_cancellation: bool = True, **settings: Any):
        server_class = TestServer if handler_cancellation else NonCancellingTestServer
        return await aiohttp_client(server_class(create_simulator(Settings(**settings))))

    return make


@pytest.fixture(params=[True, False], ids=["handler-cancellation", "no-handler-cancellation"])
def handler_cancellation(request) -> bool:
    """Disconnect behaviour must hold whether or not aiohttp cancels handlers."""
    return request.param


@pytest.fixture
async def simulator(aiohttp_server):
    return await aiohttp_server(create_simulator(Settings()))


@pytest.fixture
def sim_url(simulator) -> str:
    return str(simulator.make_url("")).rstrip("/")


@pytest.fixture
def config(tmp_path, sim_url) -> Config:
    """The embedded default, with a ledger in a temp dir and every provider at the simulator."""
    config = Config()
    return msgspec.structs.replace(
        config, ledger=msgspec.structs.replace(config.ledger, url=f"sqlite:///{tmp_path}/ledger.db"),
        providers=at_simulator(config.providers, sim_url))


def at_simulator(providers: dict[str, ProviderConfig], sim_url: str) -> dict[str, ProviderConfig]:
    """Every provider of `providers` served by the simulator at `sim_url`, by its protocol (the
    clouds with the credentials the simulator checks: tests.support.cloud_provider)."""
    return {name: cloud_provider(provider.protocol, sim_url, timeout_s=5) for name, provider in providers.items()}


class Gateway:
    """A running gateway plus helpers to act on its ledger the way an operator would."""

    def __init__(self, server, client) -> None:
        self.server, self.client = server, client
        self.ledger = server.app[LEDGER]

    @property
    def url(self) -> str:
        return str(self.server.make_url("")).rstrip("/")

    async def new_org(self, credits_inr: str = "100", retention: str = "retain") -> dict:
        org = await admin.create_org(self.ledger.recorder, "test-org", credits_inr, retention)
        await self.ledger.follower.catch_up()  # as the poll would, without waiting for it
        return org

    async def balance(self, org_id: str) -> Decimal:
        """The balance in the ledger's projection (what `gateway admin balance` reports)."""
        (credits, spent), = await self.ledger.recorder._fetch(
            "SELECT credits_inr_nano, spent_inr_nano FROM orgs WHERE org_id = ?", (org_id,))
        return from_nano(credits - spent)

    async def events(self) -> list:
        return await self.ledger.recorder.read(0, 100_000)


@pytest.fixture
def make_gateway(aiohttp_server, aiohttp_client):
    async def start(config: Config, **options) -> Gateway:
        app = create_app(config, **options)
        try:
            server = await aiohttp_server(app)
        except BaseException:
            # A failed start-up closes what it opened, as `gateway serve` does (its GuardedAppRunner);
            # aiohttp's test server does not, and an open ledger's thread would outlive the test.
            await app.cleanup()
            raise
        return Gateway(server, await aiohttp_client(server))
    return start


@pytest.fixture
async def make_pg_gateway(make_gateway):
    """`await make_pg_gateway(config)`: a gateway whose ledger is PostgreSQL, in a schema of its
    own that is dropped after the test. Skips locally (fails under CI=true) without PostgreSQL."""
    async with contextlib.AsyncExitStack() as schemas:
        async def start(config: Config) -> Gateway:
            schema = await schemas.enter_async_context(postgres_schema("gw"))
            ledger = msgspec.structs.replace(config.ledger, url=postgres_url(schema=schema))
            gateway = await make_gateway(msgspec.structs.replace(config, ledger=ledger))
            # Closed before its schema is dropped: its background loops (webhooks, batches) still
            # read it, and DROP SCHEMA racing a read can deadlock.
            schemas.push_async_callback(gateway.server.close)
            return gateway
        yield start


@pytest.fixture
def no_anthropic_env(monkeypatch):
    """For the anthropic SDK's tests (`pytest.mark.usefixtures`): the SDK reads these, and a
    developer's own key must not reach the gateway under test."""
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


# -- PostgreSQL through a proxy the test controls (tests/tcp_proxy.py), for the outage tests -------

@pytest.fixture
async def pg_proxy():
    """A TcpProxy in front of the local PostgreSQL (skips locally, fails under CI=true, without it)."""
    async with proxied_service(5432, "PostgreSQL") as proxy:
        yield proxy


@pytest.fixture
async def pg_schema():
    """The name of a fresh schema in the test database, dropped after the test."""
    async with postgres_schema("outage") as name:
        yield name


@pytest.fixture
async def gateway(make_gateway, config) -> Gateway:
    return await make_gateway(config)


@pytest.fixture
async def org(gateway) -> dict:
    return await gateway.new_org("100")


@pytest.fixture
async def receiver():
    """A real webhook receiver on 127.0.0.1 (tests.gateway.webhooks.receiver)."""
    running = Receiver()
    await running.start()
    yield running
    await running.stop()


@pytest.fixture(scope="session")
def s3_server():
    """An S3 API server (moto in server mode) in this process; yields its endpoint URL."""
    import logging

    from moto.server import ThreadedMotoServer

    # werkzeug logs every request to stderr; keep failing tests' captured output readable.
    werkzeug_log = logging.getLogger("werkzeug")
    level = werkzeug_log.level
    werkzeug_log.setLevel(logging.WARNING)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()  # returns once the socket is bound, so port 0 has become a real port
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()
    werkzeug_log.setLevel(level)


@pytest.fixture
def s3_bucket() -> str:
    """A bucket name no other test uses (the bucket itself is not created)."""
    import uuid

    return f"test-{uuid.uuid4().hex}"


@pytest.fixture
async def s3_client(s3_server: str):
    """A plain aiobotocore S3 client, to check what our code did from the outside."""
    from storage.objects import client_config, isolated_session

    async with isolated_session().create_client(
            "s3", endpoint_url=s3_server, region_name=S3_CREDENTIALS["region"],
            aws_access_key_id=S3_CREDENTIALS["access_key_id"],
            aws_secret_access_key=S3_CREDENTIALS["secret_access_key"],
            config=client_config()) as client:
        yield client


@pytest.fixture
def s3_config(config, s3_server, s3_bucket) -> Config:
    """The test config with object storage on the moto server (music storage "s3")."""
    storage = msgspec.structs.replace(
        config.storage, s3_endpoint_url=s3_server, s3_bucket=s3_bucket,
        s3_access_key_id=S3_CREDENTIALS["access_key_id"],
        s3_secret_access_key=S3_CREDENTIALS["secret_access_key"], signing_secret="test-signing-secret")
    return msgspec.structs.replace(config, storage=storage)


@pytest.fixture
async def hosted(make_gateway, s3_config) -> Gateway:
    """A gateway that hosts music in the S3 bucket."""
    return await make_gateway(s3_config)


@pytest.fixture
async def hosted_org(hosted) -> dict:
    return await hosted.new_org("50")
