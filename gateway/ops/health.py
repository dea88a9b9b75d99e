"""The health report of spec 2.6: real checks of the database and Redis, plus billing backlog."""

import asyncio
from collections.abc import Awaitable

from gateway import __version__
from gateway.redis_client import FAILURES as REDIS_FAILURES, drop_idle_connections
from gateway.services import Services
from ledger import queries
from ledger.recorder import LedgerUnavailable
from ledger.writer import STUCK_S  # the writer's own rule: paid requests are refused past it too

# Both checks run at once, each cut off after this: the report never takes much longer.
CHECK_TIMEOUT_S = 2.0


async def report(services: Services, skip: set[str]) -> tuple[int, dict]:
    """(HTTP status, body): 200 when every check that ran passed, else 503."""
    database, redis = await asyncio.gather(
        _check(_ping_database(services)) if "database" not in skip else _skipped(),
        _check_redis(services) if "redis" not in skip else _skipped())
    pending, oldest = services.writer.backlog()
    ledger = {"pending_appends": pending, "oldest_pending_s": round(oldest, 3),
              "stuck": oldest >= STUCK_S}
    healthy = not database.get("failed") and not redis.get("failed") and not ledger["stuck"]
    body = {
        "message": "model gateway is healthy" if healthy else "model gateway is unhealthy",
        "version": __version__,
        "health": {"status": "ok" if healthy else "error", "redis": _public(redis),
                   "database": _public(database), "ledger": ledger},
    }
    return (200 if healthy else 503), body


async def _ping_database(services: Services) -> None:
    await queries.ping(services.recorder)


async def _check_redis(services: Services) -> dict:
    if services.redis is None:
        return {"connected": False, "error": "not configured"}  # not configured is not a failure
    checked = await _check(services.redis.ping())
    if checked.get("failed"):  # the next probe starts afresh rather than on a broken connection
        await drop_idle_connections(services.redis, CHECK_TIMEOUT_S)
    return checked


async def _check(probe: Awaitable[object]) -> dict:
    try:
        await asyncio.wait_for(probe, CHECK_TIMEOUT_S)
    except (LedgerUnavailable, *REDIS_FAILURES) as exc:
        reason = str(exc) or f"no answer within {CHECK_TIMEOUT_S} s"
        return {"connected": False, "error": f"{type(exc).__name__}: {reason}"[:300], "failed": True}
    return {"connected": True, "error": ""}


async def _skipped() -> dict:
    return {"connected": False, "error": "skipped"}


def _public(check: dict) -> dict:
    return {"connected": check["connected"], "error": check["error"]}
