"""Taking in request bodies: who may send one, and when its bytes go back to the budget.

A paid route (its Endpoint says so, see gateway.edge.routes) refuses an organization that cannot
pay (402, recorded in its request log) before its body is read, so a large upload costs nothing
but its headers. Every body read into memory draws on one per-process budget
(`[server] max_inflight_body_bytes`, see gateway.edge.body_budget); a request's share goes back
when the request ends, which is when its body is let go.
"""

from aiohttp import web
from aiohttp.typedefs import Handler

from gateway.billing.charging import refused_unread, require_credit_before_body
from gateway.edge.errors import ApiError
from gateway.edge.body_budget import BodyHold
from gateway.edge.state import BODY_BUDGET, BODY_HOLD, CALLER, ROUTE, SERVICES


@web.middleware
async def intake(request: web.Request, handler: Handler) -> web.StreamResponse:
    """After authentication: 402 before the body for a paid route the organization cannot pay
    for; the request's share of the body budget given back when it ends."""
    if request[ROUTE].paid and CALLER in request:
        services, caller = request.app[SERVICES], request[CALLER]
        try:
            require_credit_before_body(services, caller)
        except ApiError as error:
            raise await refused_unread(services, caller, request.path, error) from None
    hold = request[BODY_HOLD] = BodyHold(request.app[BODY_BUDGET])
    try:
        return await handler(request)
    finally:
        hold.release()
