"""Per-key rate limits: requests and tokens per minute, in fixed one-minute windows.

With `[redis] url` the counters live in Redis, so every replica and worker shares them; without
it they live in this process. Policy when Redis fails: fail OPEN (the request is served and a
warning logged): a cache outage must not become an API outage, and billing never depends on
Redis. A failure of any kind (reset, refused, timeout) also opens a breaker, so for its
cool-down requests skip Redis at once instead of each waiting on it. A key's own limits
(`gateway admin set-key-limits`) override the `[limits]` defaults; 0 means unlimited.
"""

import asyncio
import time

import msgspec
import structlog
from redis.asyncio import Redis

from gateway.accounts.directory import Directory
from gateway.config import LimitsConfig, RedisConfig
from gateway.ops.facts import RequestFacts
from gateway.edge.errors import ApiError
from gateway.redis_client import FAILURES, Breaker, call_budget_s, drop_idle_connections
from ledger.events import RequestCompleted

WINDOW_S = 60
log = structlog.get_logger("gateway.accounts.limits")


class Limits(msgspec.Struct, frozen=True):
    requests_per_minute: int = 0
    tokens_per_minute: int = 0


def limits_for(directory: Directory, defaults: LimitsConfig, key_id: str) -> Limits:
    """The key's own rate limits, else the configured defaults."""
    own = directory.key_limits(key_id)
    return Limits(*own) if own else Limits(defaults.requests_per_minute, defaults.tokens_per_minute)


def window(now: float) -> tuple[int, int]:
    """The current window's number and the seconds until the next one starts."""
    number = int(now // WINDOW_S)
    return number, max(1, int((number + 1) * WINDOW_S - now + 0.999))


def too_many(what: str, limit: int, retry_after: int) -> ApiError:
    return ApiError(429, f"rate limit reached: this key may make {limit} {what} per minute;"
                         f" retry in {retry_after} s", type="rate_limit_exceeded",
                    headers={"Retry-After": str(retry_after)})


class RateLimiter:
    def __init__(self, redis: Redis | None, config: RedisConfig = RedisConfig()) -> None:
        self._redis = redis
        self._breaker = Breaker(config.cooldown_s)
        self._budget_s = call_budget_s(config)
        self._local: dict[str, int] = {}  # counter key -> count, this window (no Redis)
        self._local_window = -1

    async def admit(self, key_id: str, limits: Limits) -> None:
        """Count one request; 429 if it passes the request limit or the window's tokens are spent."""
        if not (limits.requests_per_minute or limits.tokens_per_minute):
            return
        number, retry_after = window(time.time())
        requests, tokens = await self._count(key_id, number, requests=1, tokens=0)
        if limits.requests_per_minute and requests > limits.requests_per_minute:
            raise too_many("requests", limits.requests_per_minute, retry_after)
        if limits.tokens_per_minute and tokens >= limits.tokens_per_minute:
            raise too_many("tokens", limits.tokens_per_minute, retry_after)

    async def spend(self, key_id: str, limits: Limits, tokens: int) -> None:
        """Add a finished request's tokens to its key's window; never raises for Redis."""
        if limits.tokens_per_minute and tokens:
            await self._count(key_id, window(time.time())[0], requests=0, tokens=tokens)

    async def _count(self, key_id: str, number: int, *, requests: int, tokens: int) -> tuple[int, int]:
        names = (f"limits:{key_id}:{number}:requests", f"limits:{key_id}:{number}:tokens")
        if self._redis is None:
            return self._count_locally(names, number, requests, tokens)
        if not self._breaker.allows():
            return 0, 0  # Redis failed moments ago: fail open at once, see above
        try:
            async with asyncio.timeout(self._budget_s):
                counted = await _count_in_redis(self._redis, names, requests, tokens)
        except FAILURES as exc:
            self._breaker.failed()
            log.warning("rate_limit_unavailable", error=f"{type(exc).__name__}: {exc}"[:200])  # fail open
            await drop_idle_connections(self._redis, self._budget_s)
            return 0, 0
        self._breaker.succeeded()
        return counted

    def _count_locally(self, names: tuple[str, str], number: int, requests: int, tokens: int) -> tuple[int, int]:
        if number != self._local_window:
            self._local, self._local_window = {}, number  # a new window: old counters are done
        self._local[names[0]] = self._local.get(names[0], 0) + requests
        self._local[names[1]] = self._local.get(names[1], 0) + tokens
        return self._local[names[0]], self._local[names[1]]


async def _count_in_redis(redis: Redis, names: tuple[str, str], requests: int, tokens: int) -> tuple[int, int]:
    """Both counters of the window, raised by `requests` and `tokens`, in one round trip."""
    async with redis.pipeline(transaction=False) as pipe:
        pipe.incrby(names[0], requests)
        pipe.expire(names[0], 2 * WINDOW_S)
        pipe.incrby(names[1], tokens)
        pipe.expire(names[1], 2 * WINDOW_S)
        counted_requests, _, counted_tokens, _ = await pipe.execute()
    return counted_requests, counted_tokens


class TokenSpend:
    """A charge observer (gateway.billing.observers): a committed request's tokens count against its
    key's window."""

    def __init__(self, limiter: RateLimiter, directory: Directory, defaults: LimitsConfig) -> None:
        self._limiter, self._directory, self._defaults = limiter, directory, defaults

    async def charged(self, facts: RequestFacts, event: RequestCompleted) -> None:
        limits = limits_for(self._directory, self._defaults, event.key_id)
        await self._limiter.spend(event.key_id, limits, event.prompt_tokens + event.completion_tokens)
