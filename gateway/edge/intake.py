"""Taking in request bodies: who may send one, and when its bytes go back to the budget.

A paid route refuses an organization that cannot pay (402, recorded in its request log) before its
body is read, so a large upload costs nothing but its headers. Every body read into memory draws
on one per-process budget (`[server] max_inflight_body_bytes`, see gateway.edge.body_budget); a
request's share goes back when the request ends, which is when its body is let go.
"""

from aiohttp import web
from aiohttp.typedefs import Handler

from gateway.audio import speech as audio, transcription
from gateway.chat import service as chat, completions
from gateway.embeddings import service as embeddings
from gateway.messages import service as messages
from gateway.billing.charging import refused_unread, require_credit_before_body
from gateway.edge.errors import ApiError
from gateway.edge.body_budget import BodyHold
from gateway.music import generation as music_generation
from gateway.responses import service as responses
from gateway.edge.state import BODY_BUDGET, BODY_HOLD, CALLER, SERVICES

# The routes that bill the organization, so may refuse one without credit before the body.
PAID_ROUTES = frozenset({chat.ROUTE, completions.ROUTE, messages.ROUTE, responses.ROUTE, embeddings.ROUTE,
                         audio.ROUTE, transcription.ROUTE, music_generation.ROUTE})


@web.middleware
async def intake(request: web.Request, handler: Handler) -> web.StreamResponse:
    """After authentication: 402 before the body for a paid route the organization cannot pay
    for; the request's share of the body budget given back when it ends."""
    if request.method == "POST" and request.path in PAID_ROUTES and CALLER in request:
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
