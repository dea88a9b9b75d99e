"""Prometheus metrics, served at GET /metrics (no key: restrict it at the network edge).

Under `gateway serve --workers N` the supervisor gives every worker one directory in
PROMETHEUS_MULTIPROC_DIR; each worker writes its samples there (prometheus_client's multiprocess
mode) and whichever worker answers a scrape sums them all, so the numbers are the whole
server's. The retention gauges are read from the ledger at scrape time, the same from any worker.
"""

import os
import time
from collections.abc import Iterable, Mapping
from typing import Generic, TypeVar

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest, multiprocess
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from gateway.ops.facts import RequestFacts
from ledger import checkpoints, queries
from ledger.events import RequestCompleted
from ledger.money import from_nano
from ledger.recorder import Recorder

MULTIPROCESS_DIR = "PROMETHEUS_MULTIPROC_DIR"
SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
BATCH_SIZES = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2000)
REQUEST_LABELS = ("route", "model", "provider", "status")
CIRCUIT_VALUES = {"closed": 0, "half_open": 1, "open": 2}
LabelledMetric = TypeVar("LabelledMetric", Counter, Histogram)


class Metrics:
    """The gateway's metrics; one instance per app (no module-level state)."""

    def __init__(self, retention_days: int) -> None:
        shared = bool(os.environ.get(MULTIPROCESS_DIR))
        self._registry = None if shared else CollectorRegistry()  # shared: files, not a registry
        self._retention_days = retention_days
        r = self._registry
        self.requests = Counter("gateway_requests", "Requests answered", REQUEST_LABELS, registry=r)
        self.latency = Histogram("gateway_request_seconds", "Time to answer", REQUEST_LABELS,
                                 buckets=SECONDS, registry=r)
        self.upstream = Histogram("gateway_upstream_seconds", "Time to the provider's response headers",
                                  ("provider", "status"), buckets=SECONDS, registry=r)
        self.attempts = Counter("gateway_upstream_attempts", "Calls to providers by how they ended (ok, or"
                                " the failure: a status, connection, timeout, deadline)", ("provider", "outcome"),
                                registry=r)
        self.failovers = Counter("gateway_failovers", "Requests moved on from a provider that failed",
                                 ("provider", "reason"), registry=r)
        self.tokens = Counter("gateway_tokens", "Tokens used", ("model", "provider", "kind"), registry=r)
        self.cost = Counter("gateway_cost_inr", "INR charged to credits", ("model", "provider"), registry=r)
        self.batch = Histogram("gateway_ledger_batch_size", "Appends per group commit", buckets=BATCH_SIZES,
                               registry=r)
        self.commit = Histogram("gateway_ledger_commit_seconds", "Time a group commit took",
                                buckets=SECONDS, registry=r)
        self.escrow = Counter("gateway_escrow_slices", "Escrow slices by what happened to them: taken,"
                              " refilled, returned, expired (lost to a lapsed lease), fallback (a request that"
                              " did not fit its slice held on its own)", ("event",), registry=r)
        self.expired = Counter("gateway_holds_expired", "Holds whose lease lapsed (their process gone or"
                               " stalled) released by this process", registry=r)
        self.anomalies = Counter("gateway_charge_anomalies", "Requests whose true cost exceeded what they"
                                 " held (a provider reporting more than it was allowed, or a lapsed hold)",
                                 ("model", "provider"), registry=r)
        self.records = Counter("gateway_ledger_records", "Request records the ledger did not take at once, by"
                               " outcome: withdrawn (queued past record_timeout_s, nothing charged), failed"
                               " (refused or the database away before COMMIT, nothing charged), in_doubt (COMMIT"
                               " unanswered: the charge stands and is appended again until it lands)",
                               ("outcome",), registry=r)
        self.backlog = Gauge("gateway_ledger_backlog", "Appends waiting to commit", registry=r,
                             multiprocess_mode="livesum")

        self._requests, self._latency, self._upstream = Children(self.requests), Children(self.latency), \
            Children(self.upstream)
        self._tokens, self._cost = Children(self.tokens), Children(self.cost)
        self._attempts, self._failovers = Children(self.attempts), Children(self.failovers)

    def observe_request(self, request: web.Request, status: int, seconds: float, facts: RequestFacts) -> None:
        """One answered request, labelled from its route and its facts (model and provider)."""
        resource = request.match_info.route.resource
        labels = (resource.canonical if resource else "unmatched", facts.model or "", facts.provider or "",
                  str(status))
        self._requests(labels).inc()
        self._latency(labels).observe(seconds)

    async def charged(self, facts: RequestFacts, event: RequestCompleted) -> None:
        """A charge observer (gateway.billing.observers): a committed charge's tokens and INR."""
        self.observe_charge(event.model, event.provider, event.prompt_tokens, event.completion_tokens,
                            float(from_nano(event.charged_inr_nano)))

    def observe_charge(self, model: str, provider: str, prompt: int, completion: int, inr: float) -> None:
        # A counter refuses to go down; a negative amount (the ledger refuses those too) is not
        # counted rather than raised after the charge was committed.
        self._tokens((model, provider, "prompt")).inc(max(prompt, 0))
        self._tokens((model, provider, "completion")).inc(max(completion, 0))
        self._cost((model, provider)).inc(max(inr, 0.0))

    def observe_escrow(self, event: str) -> None:
        self.escrow.labels(event).inc()

    def observe_expired(self, count: int) -> None:
        self.expired.inc(count)

    def observe_record(self, outcome: str) -> None:
        self.records.labels(outcome).inc()

    def observe_anomaly(self, model: str, provider: str) -> None:
        self.anomalies.labels(model, provider).inc()

    def observe_attempt(self, provider: str, outcome: str) -> None:
        self._attempts((provider, outcome)).inc()

    def observe_failover(self, provider: str, reason: str) -> None:
        """A request left `provider` for the next (it failed with `reason`)."""
        self._failovers((provider, reason)).inc()

    def observe_batch(self, size: int, seconds: float, waiting: int) -> None:
        self.batch.observe(size)
        self.commit.observe(seconds)
        self.backlog.set(waiting)

    def observe_upstream(self, provider: str, status: int, seconds: float) -> None:
        """A provider's time to its response headers (gateway.providers.http.Upstream)."""
        self._upstream((provider, str(status))).observe(seconds)

    async def render(self, recorder: Recorder, circuits: Mapping[str, str]) -> bytes:
        """Every metric; `circuits`: each provider's circuit state as this process sees it."""
        registry = CollectorRegistry()
        if self._registry is None:  # shared
            multiprocess.MultiProcessCollector(registry)
        else:
            registry.register(_Registered(self._registry))
        due, expired = await self._retention_state(recorder)
        registry.register(_Fixed([
            _gauge("gateway_media_due", "Hosted tracks past the retention period, not yet swept", due),
            _gauge("gateway_media_expired", "Hosted tracks the sweepers have deleted", expired),
            *await _verified_state(recorder), _circuit_states(circuits)]))
        return generate_latest(registry)

    async def _retention_state(self, recorder: Recorder) -> tuple[int, int]:
        cutoff = (time.time_ns() // 1000) - self._retention_days * 86_400_000_000
        return await queries.hosted_due_count(recorder, cutoff), await queries.expired_media_count(recorder)


async def _verified_state(recorder: Recorder) -> list[Metric]:
    """Where the last checkpoint (ledger.checkpoints) verified the ledger to, and how long ago;
    the age is absent while the ledger was never verified."""
    latest = await checkpoints.latest(recorder)
    position = _gauge("gateway_ledger_verified_position", "The last ledger position verified (0: never)",
                      latest.verified.upto if latest else 0)
    if latest is None:
        return [position]
    return [position, _gauge("gateway_ledger_verified_age_seconds", "Seconds since the ledger last verified",
                             max(0.0, latest.age_s()))]


class Children(Generic[LabelledMetric]):
    """A labelled metric's children by their label values. prometheus_client's labels() checks
    and locks on every call; here each child is looked up there once. Holds no more children
    than the metric itself does."""

    def __init__(self, metric: LabelledMetric) -> None:
        self._metric: LabelledMetric = metric
        self._children: dict[tuple[str, ...], LabelledMetric] = {}

    def __call__(self, labels: tuple[str, ...]) -> LabelledMetric:
        child = self._children.get(labels)
        if child is None:
            child = self._children[labels] = self._metric.labels(*labels)
        return child


def _circuit_states(circuits: Mapping[str, str]) -> GaugeMetricFamily:
    family = GaugeMetricFamily("gateway_circuit_state", "A provider's circuit: 0 closed, 1 half-open"
                               " (one probe may go), 2 open (skipped)", labels=["provider"])
    for provider, state in sorted(circuits.items()):
        family.add_metric([provider], CIRCUIT_VALUES[state])
    return family


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)


class _Fixed:
    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterable[Metric]:
        return self._families


class _Registered:
    """This process's registry as one collector of a scrape's registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry

    def collect(self) -> Iterable[Metric]:
        return self._registry.collect()
