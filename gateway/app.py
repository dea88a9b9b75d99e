"""The application factory: one cleanup context per resource, typed keys (gateway.edge.state), and
every endpoint (gateway.routes) registered through the route table (gateway.edge.routes)."""

import asyncio
import os
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import aiohttp
import structlog
from aiohttp import web

from gateway import providers, redis_client
from gateway.realtime import session as realtime
from gateway.billing.attempts import AttemptCharges
from gateway.billing.escrow import Escrow
from gateway.billing.leases import HoldLeases
from gateway.billing.releases import Releases
from gateway.edge.body_budget import BodyBudget
from gateway.catalogue import CatalogueError, publishing
from gateway.catalogue.live import LiveCatalogue
from gateway.config import Config, ConfigError, LedgerConfig
from gateway.accounts.directory import Directory
from gateway.edge.intake import intake
from gateway.accounts.limits import RateLimiter, TokenSpend
from gateway.ops import checkpointing
from gateway.ops.facts import ChargeFacts, CostHeaders
from gateway.ops.metrics import Metrics
from gateway.edge.middleware import add_request_id, authenticate, observe
from gateway.edge.openapi import build as build_openapi
from gateway.edge.routes import RouteTable, largest_body
from gateway.music.parts import music_ctx
from gateway.accounts.provider_keys import ProviderKeys
from gateway.providers.http import Upstream
from gateway.accounts.redaction import Redactor
from gateway.routing.circuits import Circuits
from gateway.routing.router import Router
from gateway.accounts.sealing import Sealer
from gateway.routes import ENDPOINTS
from gateway.billing.observers import ChargeObserver
from gateway.services import Services
from gateway.telemetry.settings import otlp_endpoint
from gateway.batches.running import BatchRunner
from gateway.webhooks.delivery import Deliverer
from gateway.webhooks.sending import Sender
from gateway.webhooks.subscriptions import Webhooks
from gateway.edge.state import (
    BODY_BUDGET,
    CLOCK,
    CONFIG,
    LEDGER,
    METRICS,
    REDIS,
    ROUTER,
    ROUTES,
    SERVICES,
    SESSIONS,
    STORE,
    TRACING,
    UPSTREAM,
    Ledger,
)
from ledger.backends import recorder_for
from ledger.follower import LogFollower
from ledger.recorder import Clock, LedgerError, Recorder, wall_clock_us
from ledger.signing import Signer, SigningKeyError
from ledger.writer import GroupCommitWriter
from storage.files import file_store, local_root
from storage.settings import open_store

if TYPE_CHECKING:
    from gateway.telemetry.tracing import Tracing

log = structlog.get_logger("gateway.app")


def create_app(config: Config, *, clock: Clock = wall_clock_us) -> web.Application:
    app = web.Application(middlewares=[observe, authenticate, intake],
                          client_max_size=largest_body(ENDPOINTS))  # each route's own limit is its body's
    app[BODY_BUDGET] = BodyBudget(config.server.max_inflight_body_bytes, config.server.body_budget_wait_s)
    app[CONFIG] = config
    app[CLOCK] = clock
    app[METRICS] = Metrics(config.storage.retention_days)
    app.on_response_prepare.append(add_request_id)
    app[SESSIONS] = set()
    app.on_shutdown.append(realtime.end_sessions)
    app.cleanup_ctx.extend([ledger_ctx, redis_ctx, telemetry_ctx, upstream_ctx, storage_ctx, services_ctx, music_ctx,
                            webhooks_ctx, batches_ctx])
    app[ROUTES] = RouteTable(app.router, ENDPOINTS)
    app.on_startup.append(build_openapi)  # after the catalogue is loaded (cleanup contexts run first)
    return app


def ledger_recorder(settings: LedgerConfig, clock: Clock = wall_clock_us) -> Recorder:
    """The configured ledger's recorder, with its timeouts (not yet open)."""
    return recorder_for(settings.url, timeout_s=settings.timeout_s, connect_timeout_s=settings.connect_timeout_s,
                        clock=clock)


async def ledger_ctx(app: web.Application) -> AsyncIterator[None]:
    """The recorder, its group-commit writer, and the in-memory directory that follows it."""
    settings = app[CONFIG].ledger
    recorder = ledger_recorder(settings, app[CLOCK])
    await recorder.open(migrate=settings.migrate_on_start)
    directory = Directory()
    follower = LogFollower(recorder, directory.apply, after=await directory.load(recorder))
    writer = GroupCommitWriter(recorder, on_commit=follower.applied_locally, on_batch=lambda size, seconds:
                               app[METRICS].observe_batch(size, seconds, writer.backlog()[0]))
    writer.start()
    follower.start()
    app[LEDGER] = Ledger(recorder, writer, directory, follower)
    yield
    await writer.close()  # every accepted charge is committed before the ledger closes
    await follower.stop()
    await recorder.close()


async def upstream_ctx(app: web.Application) -> AsyncIterator[None]:
    """One pooled client session for every upstream call of this process, and the router that
    learns each provider's latency from it (its circuits shared through Redis when configured)."""
    config, metrics = app[CONFIG], app[METRICS]
    router = app[ROUTER] = Router(config.routing, Circuits(config.routing, app[REDIS], config.redis))

    def observe(provider: str, status: int, seconds: float) -> None:
        metrics.observe_upstream(provider, status, seconds)
        router.observe(provider, status, seconds)

    connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, ttl_dns_cache=300)
    async with aiohttp.ClientSession(connector=connector) as session:
        app[UPSTREAM] = Upstream(session, observe, tracing=app[TRACING])
        yield


async def telemetry_ctx(app: web.Application) -> AsyncIterator[None]:
    """Traces, when an OTLP endpoint is configured (gateway.telemetry); else None and no SDK."""
    settings = app[CONFIG].telemetry
    endpoint = otlp_endpoint(settings, os.environ)
    if endpoint is None:
        app[TRACING] = None
        yield
        return
    from gateway.telemetry.tracing import Tracing  # the OpenTelemetry SDK is loaded only now
    tracing = app[TRACING] = Tracing.configured(settings, os.environ, endpoint)
    yield
    await asyncio.to_thread(tracing.shutdown)  # exports what is queued, bounded by its timeout


async def redis_ctx(app: web.Application) -> AsyncIterator[None]:
    redis = app[REDIS] = redis_client.connect(app[CONFIG].redis)  # None when not configured
    yield
    if redis is not None:
        await redis.aclose()


async def storage_ctx(app: web.Application) -> AsyncIterator[None]:
    """One S3 client per process when object storage is configured (else None)."""
    async with open_store(app[CONFIG].storage) as store:
        app[STORE] = store
        yield


def _span_charges(tracing: "Tracing | None") -> tuple[ChargeObserver, ...]:
    """What the ledger recorded, on the request's span: an observer only while traces are on."""
    if tracing is None:
        return ()
    from gateway.telemetry.tracing import SpanCharges
    return (SpanCharges(),)


async def webhooks_ctx(app: web.Application) -> AsyncIterator[None]:
    """The one delivery loop of this process: it delivers while it has the ledger's turn at it."""
    services, config = app[SERVICES], app[CONFIG].webhooks
    sender = Sender(services.webhooks.policy, timeout_s=config.timeout_s, max_response_bytes=config.max_response_bytes)
    deliverer = Deliverer(services.recorder, services.writer.append, sender, services.webhooks, config)
    delivering = asyncio.create_task(deliverer.run(), name="webhooks")
    yield
    delivering.cancel()
    await asyncio.gather(delivering, return_exceptions=True)
    await sender.close()


async def batches_ctx(app: web.Application) -> AsyncIterator[None]:
    """The one batch runner of this process: it runs the deployment's batches while it has the
    ledger's turn at them (gateway.batches.running)."""
    running = asyncio.create_task(BatchRunner(app[SERVICES]).run(), name="batches")
    yield
    running.cancel()
    await asyncio.gather(running, return_exceptions=True)


def _signer(config: Config) -> Signer | None:
    try:
        return Signer.configured(config.ledger.signing_key)
    except SigningKeyError as exc:
        raise ConfigError(f"ledger.signing_key: {exc}") from None


async def catalogue_ctx(app: web.Application) -> LiveCatalogue:
    """The configured catalogue file published (a file that does not validate, or names a provider
    not configured, stops start-up), and the catalogue in force followed from the prices stream."""
    config, ledger = app[CONFIG], app[LEDGER]
    published = await publishing.publish_configured(ledger.recorder, config, app[CLOCK])
    live = LiveCatalogue(published.catalogues[0], config.providers, clock=app[CLOCK])
    ledger.follower.listen(live.apply)
    await live.load(ledger.recorder)
    return live


async def reload_catalogue(app: web.Application) -> None:
    """SIGHUP: publish the configured catalogue file again; one that does not validate is refused
    with the reason, and the catalogue in force keeps serving."""
    services = app[SERVICES]
    try:
        published = await publishing.publish_configured(services.recorder, services.config, app[CLOCK])
    except (CatalogueError, OSError, LedgerError) as exc:
        log.error("catalogue_reload_refused", reason=str(exc))
        return
    if published.recorded is not None:
        services.catalogues.take(published.recorded, published.catalogues)
    log.info("catalogue_reloaded", **published.summary())


async def services_ctx(app: web.Application) -> AsyncIterator[None]:
    """What handlers use, assembled from the resources above."""
    config, ledger = app[CONFIG], app[LEDGER]
    catalogues = await catalogue_ctx(app)
    app[SERVICES] = Services(
        config=config, catalogues=catalogues, recorder=ledger.recorder,
        writer=ledger.writer, directory=ledger.directory,
        providers=providers.build(config.providers, app[UPSTREAM]), redis=app[REDIS], store=app[STORE],
        files=file_store(app[STORE], local_root(config.batches.files_path, config.ledger.url)),
        provider_keys=ProviderKeys(ledger.recorder, Sealer(config.secrets.master_key), ledger.directory),
        limiter=(limiter := RateLimiter(app[REDIS], config.redis)), metrics=app[METRICS],
        redactor=Redactor.for_providers(config.providers), router=app[ROUTER], releases=Releases(ledger.writer),
        leases=(leases := HoldLeases(ledger.writer, ledger.recorder, config.billing.hold_lease_s, app[METRICS])),
        escrow=(escrow := Escrow(config.billing, ledger.writer, ledger.recorder, ledger.directory, leases,
                                 app[METRICS])),
        attempt_billing=AttemptCharges(),
        # After each charge commits, in this order (gateway.billing.observers)
        charge_observers=(ChargeFacts(), CostHeaders(), app[METRICS],
                          TokenSpend(limiter, ledger.directory, config.limits), *_span_charges(app[TRACING])),
        kind_routes=app[ROUTES].kind_homes(), signer=(signer := _signer(config)), webhooks=Webhooks.configured(config),
        tracing=app[TRACING])
    maintaining = [asyncio.create_task(escrow.maintain(), name="holds")]
    if config.ledger.checkpoint_interval_s:
        maintaining.append(asyncio.create_task(checkpointing.keep(
            ledger.recorder, signer, config.ledger.checkpoint_interval_s, origin=config.ledger.log_origin),
            name="checkpoints"))
    yield
    for task in maintaining:
        task.cancel()
    await asyncio.gather(*maintaining, return_exceptions=True)
    await escrow.close()  # these are cleaned up before the ledger's context closes the writer
    await app[SERVICES].releases.close()
    await catalogues.close()
