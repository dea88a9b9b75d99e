"""Format-independent steps of serving a request according to its Plan.

Each wire format calls these so that latency, hang and pacing behave the same
whatever the format; only the bytes differ.
"""

from aiohttp import web

from simulator.connection import wait_until_gone
from simulator.plan import Plan
from simulator.recording import RECORD_KEY, Outcome


async def delay_headers(request: web.Request, plan: Plan) -> bool:
    """Apply latency and `hang` before any response byte; False when the client left meanwhile.

    A hanging request never proceeds: this returns (False) only once the client is gone.
    """
    if plan.latency_s > 0 and await wait_until_gone(request, plan.latency_s):
        return False
    if plan.hang:
        await wait_until_gone(request)
        return False
    return True


async def pace(request: web.Request, seconds: float) -> bool:
    """Sleep `seconds` between chunks; False when the client left meanwhile."""
    if seconds <= 0:
        return True
    return not await wait_until_gone(request, seconds)


def stream_cut(plan: Plan) -> int | None:
    """After how many token chunks a stream stops early (drop_after wins over hang_after)."""
    return plan.drop_after if plan.drop_after is not None else plan.hang_after


def abandoned(request: web.Request, outcome: Outcome) -> web.Response:
    """Settle a request that gets no response; aiohttp's attempt to send this one fails quietly."""
    request[RECORD_KEY].settle(outcome)
    return web.Response()
