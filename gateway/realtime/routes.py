"""The realtime route: GET /v1/realtime?model=..., a WebSocket relayed to the provider's realtime
API (a browser, which cannot set headers on a WebSocket, may send its key as a subprotocol)."""

from aiohttp import web

from gateway.edge.routes import Endpoint, Param
from gateway.edge.state import CALLER, FACTS, SERVICES
from gateway.realtime import session as realtime


async def realtime_session(request: web.Request) -> web.StreamResponse:
    """GET /v1/realtime?model=...: a WebSocket relayed to the provider's realtime API."""
    realtime.check_handshake(request)
    model = request.query.get("model", "")
    request[FACTS].update(model=model)
    session = await realtime.open_session(request.app[SERVICES], request[CALLER], model,
                                          beta=realtime.wants_beta(request))
    return await session.run(request)


ENDPOINTS = (
    Endpoint("GET", realtime.ROUTE, realtime_session, "Realtime session (a WebSocket upgrade)",
             key_in_subprotocol=True, model_kind="realtime", kind_home=True,
             query=(Param("model", required=True),), answers={"101": ()}),
)
