"""Redis, kept brief: short socket timeouts, no retries, and a breaker that skips it for a
cool-down after a failure, so an outage costs one short timeout per cool-down rather than one
per request. Everything the gateway keeps in Redis may be lost or skipped (rate limits fail
open); billing never depends on it.
"""

import asyncio
import contextlib
import time

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from gateway.config import RedisConfig

# Every way a Redis call fails. RuntimeError: under uvloop a reset connection raises "handler is
# closed" from the transport, not a RedisError (issue 12). TimeoutError covers asyncio's.
FAILURES = (RedisError, OSError, RuntimeError, TimeoutError)


def connect(config: RedisConfig) -> Redis | None:
    """A client for `[redis] url` (None when it is empty) that gives up within its timeouts."""
    if not config.url:
        return None
    return Redis.from_url(config.url, socket_connect_timeout=config.connect_timeout_s,
                          socket_timeout=config.timeout_s, retry=Retry(NoBackoff(), 0))


async def drop_idle_connections(redis: Redis, budget_s: float) -> None:
    """Close the pool's idle connections after a failure: redis-py puts a connection that failed
    with RuntimeError back as it is, and the call after the cool-down should start afresh."""
    with contextlib.suppress(*FAILURES):  # Redis is already failing; closing is best effort
        async with asyncio.timeout(budget_s):
            await redis.connection_pool.disconnect(inuse_connections=False)


def call_budget_s(config: RedisConfig) -> float:
    """The most one Redis call may take, connecting included: a bound on top of the sockets'."""
    return config.connect_timeout_s + config.timeout_s


class Breaker:
    """Closed: calls go through. After a failure it opens for `cooldown_s`; then it lets one
    trial call through (and opens again for those behind it) until a call succeeds."""

    def __init__(self, cooldown_s: float) -> None:
        self._cooldown_s = cooldown_s
        self._open_until = 0.0  # monotonic time; 0: closed

    def allows(self) -> bool:
        if not self._open_until:
            return True
        now = time.monotonic()
        if now < self._open_until:
            return False
        self._open_until = now + self._cooldown_s  # this caller is the trial; the rest wait
        return True

    def failed(self) -> None:
        self._open_until = time.monotonic() + self._cooldown_s

    def succeeded(self) -> None:
        self._open_until = 0.0
