"""Circuit breakers, one per provider: a provider that keeps failing is skipped for a while.

Closed: requests go to it. After `failure_threshold` consecutive failures (or at once for a 429
with Retry-After, for as long as it asks) the circuit opens: routing skips the provider while
another can serve, for `cooldown_s`. Then it is half-open: one request probes it (the rest still
skip it); a success closes the circuit, a failure opens it again.

Each process counts its own failures. An opened circuit is published in Redis, when configured,
with the time it cools, and every process reads the published circuits at most every
`SHARED_REFRESH_S`, so every worker and replica skips the provider; a probe that succeeds
withdraws it. Redis is an optimisation here as everywhere: without it, or while it fails,
each process keeps its own circuits.
"""

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Literal, TypeVar

from redis.asyncio import Redis

from gateway.config import RedisConfig, RoutingConfig
from gateway.redis_client import FAILURES, Breaker, call_budget_s

SHARED_REFRESH_S = 0.5  # how stale another process's view of a published circuit may be
KEY_PREFIX = "gw:circuit:"
MAX_RETRY_AFTER_S = 3600.0  # a provider's Retry-After longer than this is not believed
State = Literal["closed", "open", "half_open"]
T = TypeVar("T")


class Circuit:
    """One provider's breaker in this process. Times are wall-clock seconds, as published."""

    __slots__ = ("adopted", "failures", "open_until", "probing")

    def __init__(self) -> None:
        self.failures = 0
        self.open_until = 0.0  # 0: closed
        self.probing = False  # a request is probing the half-open circuit
        self.adopted = False  # opened by another process (read from Redis), not by this one

    def state(self, now: float) -> State:
        if not self.open_until:
            return "closed"
        return "open" if now < self.open_until else "half_open"


class Circuits:
    """Every provider's circuit in this process, shared through `redis` when it is configured."""

    def __init__(self, config: RoutingConfig, redis: Redis | None, redis_config: RedisConfig) -> None:
        self._threshold, self._cooldown_s = config.failure_threshold, config.cooldown_s
        self._redis, self._budget_s = redis, call_budget_s(redis_config)
        self._redis_breaker = Breaker(redis_config.cooldown_s)  # a failing Redis is skipped, not waited on
        self._circuits: dict[str, Circuit] = {}
        self._refreshed = 0.0  # monotonic time of the last read of the published circuits

    def _circuit(self, provider: str) -> Circuit:
        circuit = self._circuits.get(provider)
        if circuit is None:
            circuit = self._circuits[provider] = Circuit()
        return circuit

    def state(self, provider: str) -> State:
        circuit = self._circuits.get(provider)
        return "closed" if circuit is None else circuit.state(time.time())

    def states(self) -> dict[str, State]:
        """Every provider that has a circuit here, by state (for /metrics)."""
        now = time.time()
        return {provider: circuit.state(now) for provider, circuit in self._circuits.items()}

    def admits(self, provider: str) -> bool:
        """Whether routing may plan on `provider`: its circuit is not open (a half-open one
        admits a request to probe it, which `acquire` then claims)."""
        return self.state(provider) != "open"

    def acquire(self, provider: str) -> bool:
        """Claim a call to `provider` now: always while closed; while half-open only for the one
        request that probes it (until it succeeds, fails or `release`s); never while open."""
        circuit = self._circuits.get(provider)
        if circuit is None:
            return True
        match circuit.state(time.time()):
            case "closed":
                return True
            case "half_open" if not circuit.probing:
                circuit.probing = True
                return True
            case _:
                return False

    def release(self, provider: str) -> None:
        """A call that neither succeeded nor failed in a way that counts (a 400, a cancelled
        request): a probe it made is over, the circuit as it was."""
        if (circuit := self._circuits.get(provider)) is not None:
            circuit.probing = False

    async def succeeded(self, provider: str) -> None:
        circuit = self._circuits.get(provider)
        if circuit is None or (not circuit.failures and not circuit.open_until):
            return  # the common case: nothing to change, nothing to publish
        was_open = bool(circuit.open_until)
        circuit.failures, circuit.open_until, circuit.probing, circuit.adopted = 0, 0.0, False, False
        if was_open:
            await self._shared(lambda redis: redis.delete(KEY_PREFIX + provider))

    async def failed(self, provider: str, retry_after: str | None = None) -> None:
        """A failure that counts (a connection error, a timeout, 429 or 5xx)."""
        circuit = self._circuit(provider)
        circuit.failures += 1
        asked = _seconds(retry_after)
        if not (asked or circuit.probing or circuit.failures >= self._threshold):
            return
        circuit.open_until = time.time() + (asked or self._cooldown_s)
        circuit.probing = circuit.adopted = False
        until, ttl_ms = circuit.open_until, int((asked or self._cooldown_s) * 1000) + 1
        await self._shared(lambda redis: redis.set(KEY_PREFIX + provider, repr(until), px=ttl_ms))

    async def refresh(self, providers: Iterable[str]) -> None:
        """Take in the circuits other processes published (at most every SHARED_REFRESH_S)."""
        now = time.monotonic()
        if self._redis is None or now - self._refreshed < SHARED_REFRESH_S:
            return
        self._refreshed = now  # before the call: concurrent requests do not read it again
        names = sorted(set(providers))
        values = await self._shared(lambda redis: redis.mget([KEY_PREFIX + name for name in names]))
        for name, value in zip(names, values or (), strict=False):
            self._adopt(name, value)

    def _adopt(self, provider: str, value: bytes | str | None) -> None:
        """A published circuit opens this process's too; one withdrawn (a probe succeeded, or it
        cooled) closes a circuit this process adopted (its own it keeps until it cools)."""
        circuit = self._circuit(provider)
        try:
            until = float(value) if value else 0.0
        except ValueError:
            return  # not ours to read: no circuit is opened by a value that is not a time
        if until > circuit.open_until:
            circuit.open_until, circuit.probing, circuit.adopted = until, False, True
        elif not until and circuit.adopted:
            circuit.open_until, circuit.probing, circuit.adopted = 0.0, False, False

    async def _shared(self, call: Callable[[Redis], Awaitable[T]]) -> T | None:
        """`call(redis)`, bounded; None when Redis is not configured, fails, or failed within its
        cool-down (circuits then stay per process, which is what they are without Redis)."""
        if self._redis is None or not self._redis_breaker.allows():
            return None
        try:
            async with asyncio.timeout(self._budget_s):
                result = await call(self._redis)
        except FAILURES:
            self._redis_breaker.failed()
            return None
        self._redis_breaker.succeeded()
        return result


def _seconds(retry_after: str | None) -> float:
    """A Retry-After given in seconds (0 when absent, or a date, or not believable)."""
    try:
        seconds = float(retry_after) if retry_after else 0.0
    except ValueError:
        return 0.0
    return seconds if 0 < seconds <= MAX_RETRY_AFTER_S else 0.0
