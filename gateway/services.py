"""Everything a request handler's service function needs, built once per process."""

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

import msgspec
from redis.asyncio import Redis

from gateway.billing.escrow import Escrow, Reservation
from gateway.billing.leases import HoldLeases
from gateway.billing.observers import ChargeObserver
from gateway.billing.releases import Releases
from gateway.catalogue import Catalogue, Kind
from gateway.catalogue.live import LiveCatalogue
from gateway.config import Config
from gateway.accounts.directory import Directory, Principal
from gateway.ops.facts import RequestFacts
from gateway.accounts.limits import Limits, RateLimiter, limits_for
from gateway.ops.metrics import Metrics
from gateway.accounts.provider_keys import ProviderKeys
from gateway.providers.capabilities import Providers
from gateway.accounts.redaction import Redactor
from gateway.routing.attempts import AttemptBilling
from gateway.routing.router import Router
from gateway.webhooks.subscriptions import Webhooks

if TYPE_CHECKING:  # the OpenTelemetry SDK is imported only when tracing is on
    from gateway.telemetry.tracing import Tracing
from ledger.events import Attempt, CreditsHeld
from ledger.recorder import Recorder
from ledger.signing import Signer
from ledger.writer import GroupCommitWriter
from storage.files import FileStore
from storage.objects import ObjectStore


class Services(msgspec.Struct, frozen=True, kw_only=True):
    """The parts of a running gateway; None only where absence is a configuration."""

    config: Config
    catalogues: LiveCatalogue  # the catalogue in force, switching when the prices stream says
    recorder: Recorder
    writer: GroupCommitWriter
    directory: Directory
    providers: Providers
    redis: Redis | None  # None: no Redis configured
    store: ObjectStore | None  # None: no object storage (music storage "inline")
    files: FileStore  # kept files (gateway.batches.files): the bucket's files/, else a local directory
    provider_keys: ProviderKeys  # organizations' own provider keys (BYOK)
    limiter: RateLimiter
    metrics: Metrics
    redactor: Redactor  # the configured provider keys
    router: Router  # the order a model's providers are tried in, and their circuits
    releases: Releases  # holds of requests that ended without their record, released in the background
    leases: HoldLeases  # this process's holds, renewed while they last
    escrow: Escrow  # slices of credit held ahead, requests admitted against them in memory
    attempt_billing: "AttemptBilling[Services, Caller]"  # what each routed attempt holds (gateway.billing.attempts)
    charge_observers: tuple[ChargeObserver, ...]  # told of each charge once durable, in order
    # Each model kind's route (`METHOD /path`), named to a model asked of another: the route table's
    kind_routes: Mapping[Kind, str]
    webhooks: Webhooks  # where endpoints may point, how their secrets are sealed (gateway.webhooks)
    signer: Signer | None = None  # signs checkpoints ([ledger] signing_key); None: they go unsigned
    tracing: "Tracing | None" = None  # spans ([telemetry], OTEL_*); None: tracing is off

    @property
    def catalogue(self) -> Catalogue:
        """The catalogue in force now: a request resolves against it once, and keeps its prices."""
        return self.catalogues.now()

    def limits_for(self, key_id: str) -> Limits:
        """The key's own rate limits, else the configured defaults."""
        return limits_for(self.directory, self.config.limits, key_id)


class Caller(msgspec.Struct, frozen=True):
    """One authenticated request: who pays for it, and when it started."""

    principal: Principal
    request_id: str
    started: float = msgspec.field(default_factory=time.monotonic)
    # What the request turned out to be, for its log line and metrics (gateway.ops.facts)
    facts: RequestFacts = msgspec.field(default_factory=RequestFacts)
    # Its upstream calls, in order, for its ledger event (gateway.routing.failover)
    attempts: list[Attempt] = msgspec.field(default_factory=list)
    # The credit it holds (gateway.billing.reservations), released by the unit recording it
    holds: list[CreditsHeld] = msgspec.field(default_factory=list)
    # Its worst case admitted against this process's escrow slices, drawn from by its record
    reserved: list[Reservation] = msgspec.field(default_factory=list)
    # A line of a batch (gateway.batches): recorded with its batch and custom_id, its answer kept
    # as its content until the batch's output file holds it
    batch_id: str = ""
    custom_id: str = ""

    @property
    def org_id(self) -> str:
        return self.principal.org_id

    def elapsed_ms(self) -> int:
        return int((time.monotonic() - self.started) * 1000)
