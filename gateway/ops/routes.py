"""Operations' routes: the health check (GET /), Prometheus metrics (GET /metrics) and the
OpenAPI document (GET /openapi.json), all answered without a key."""

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from gateway.edge.bodies import NO_STORE, json_response
from gateway.edge.routes import Endpoint, Param
from gateway.edge.state import DOCUMENT, METRICS, SERVICES
from gateway.ops import health


async def health_check(request: web.Request) -> web.Response:
    skip = {part.strip() for part in request.query.get("skip", "").split(",") if part.strip()}
    status, body = await health.report(request.app[SERVICES], skip)
    return json_response(body, status, headers=NO_STORE)


async def metrics(request: web.Request) -> web.Response:
    """Prometheus text format; every worker's samples summed (see gateway.ops.metrics)."""
    services = request.app[SERVICES]
    body = await request.app[METRICS].render(services.recorder, services.router.circuits.states())
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


async def openapi_document(request: web.Request) -> web.Response:
    return web.Response(body=request.app[DOCUMENT], content_type="application/json")


ENDPOINTS = (
    Endpoint("GET", "/", health_check, "Health: every dependency checked", public=True,
             query=(Param("skip", description="checks to leave out, comma-separated"),)),
    Endpoint("GET", "/metrics", metrics, "Prometheus metrics", public=True, answers={"200": ("text/plain",)}),
    Endpoint("GET", "/openapi.json", openapi_document, "This document", public=True),
)
