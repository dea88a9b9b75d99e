"""The application factory: one cleanup context per resource, typed keys, thin handlers."""

from collections.abc import AsyncIterator

import aiohttp
import msgspec
from aiohttp import web
from redis.asyncio import Redis

from gateway import providers
from gateway.catalogue import Catalogue
from gateway.config import Config
from gateway.directory import Directory
from gateway.handlers import setup_routes
from gateway.middleware import authenticate, observe
from gateway.services import Services
from gateway.state import SERVICES
from ledger.backends import recorder_for
from ledger.follower import LogFollower
from ledger.recorder import Recorder
from ledger.writer import GroupCommitWriter

MAX_BODY_BYTES = 32 * 1024 * 1024


class Ledger(msgspec.Struct, frozen=True):
    recorder: Recorder
    writer: GroupCommitWriter
    directory: Directory
    follower: LogFollower


CONFIG = web.AppKey("config", Config)
LEDGER = web.AppKey("ledger", Ledger)
UPSTREAM = web.AppKey("upstream", aiohttp.ClientSession)
REDIS = web.AppKey("redis", Redis | None)


def create_app(config: Config) -> web.Application:
    app = web.Application(middlewares=[observe, authenticate], client_max_size=MAX_BODY_BYTES)
    app[CONFIG] = config
    app.cleanup_ctx.extend([ledger_ctx, upstream_ctx, redis_ctx, services_ctx])
    setup_routes(app)
    return app


async def ledger_ctx(app: web.Application) -> AsyncIterator[None]:
    """The recorder, its group-commit writer, and the in-memory directory that follows it."""
    recorder = recorder_for(app[CONFIG].ledger.url)
    await recorder.open()
    directory = Directory()
    follower = LogFollower(recorder, directory.apply, after=await directory.load(recorder))
    writer = GroupCommitWriter(recorder, on_commit=follower.applied_locally)
    writer.start()
    follower.start()
    app[LEDGER] = Ledger(recorder, writer, directory, follower)
    yield
    await writer.close()  # every accepted charge is committed before the ledger closes
    await follower.stop()
    await recorder.close()


async def upstream_ctx(app: web.Application) -> AsyncIterator[None]:
    """One pooled client session for every upstream call of this process."""
    connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, ttl_dns_cache=300)
    async with aiohttp.ClientSession(connector=connector) as session:
        app[UPSTREAM] = session
        yield


async def redis_ctx(app: web.Application) -> AsyncIterator[None]:
    url = app[CONFIG].redis.url
    app[REDIS] = Redis.from_url(url) if url else None
    yield
    if app[REDIS] is not None:
        await app[REDIS].aclose()


async def services_ctx(app: web.Application) -> AsyncIterator[None]:
    """What handlers use, assembled from the resources above."""
    config, ledger = app[CONFIG], app[LEDGER]
    app[SERVICES] = Services(
        config, Catalogue.load(config.catalogue.path or None), ledger.recorder, ledger.writer,
        ledger.directory, providers.build(config.providers, app[UPSTREAM]), app[REDIS])
    yield
