"""The ledger's public face: an org's export and its events' inclusion proofs (admin keys), the
signed tree heads, the proofs that each extends the last and the key that signs them (no key
needed: anyone may check what the operator committed to)."""

from aiohttp import web

from gateway.edge.bodies import NO_STORE, json_response
from gateway.edge.routes import Endpoint, Param
from gateway.edge.state import CALLER, SERVICES
from gateway.ledger_api import published

NDJSON = "application/x-ndjson"


async def ledger_events(request: web.Request) -> web.StreamResponse:
    pages = published.events(request.app[SERVICES], request[CALLER], request.query)
    first = await anext(pages, b"")  # before the answer begins: a failure here is still a JSON error
    response = web.StreamResponse(headers={"Content-Type": NDJSON, **NO_STORE})
    await response.prepare(request)
    await response.write(first)
    async for page in pages:
        await response.write(page)
    await response.write_eof()
    return response


async def list_checkpoints(request: web.Request) -> web.Response:
    body = await published.listing(request.app[SERVICES], published.BEFORE.read(request.query),
                                   published.LIMIT.read(request.query))
    return json_response(body)


async def inclusion_proof(request: web.Request) -> web.Response:
    return json_response(await published.inclusion(request.app[SERVICES], request[CALLER], request.query),
                         headers=NO_STORE)


async def consistency_proof(request: web.Request) -> web.Response:
    return json_response(await published.consistency(request.app[SERVICES], request.query))


async def public_key(request: web.Request) -> web.Response:
    return web.Response(text=published.public_key(request.app[SERVICES]), content_type="application/x-pem-file")


ENDPOINTS = (
    Endpoint("GET", "/v1/ledger/events", ledger_events, "The organization's events, oldest first (admin keys)",
             query=(Param.whole(published.EXPORT_AFTER), Param.whole(published.EXPORT_LIMIT),
                    Param("from", description="events recorded from this ISO 8601 time on"),
                    Param("to", description="events recorded before this ISO 8601 time")),
             answers={"200": (NDJSON,)}),
    Endpoint("GET", "/v1/ledger/checkpoints", list_checkpoints, "The gateway's signed checkpoints, newest first",
             public=True, query=(Param.whole(published.BEFORE), Param.whole(published.LIMIT))),
    Endpoint("GET", "/v1/ledger/proofs/inclusion", inclusion_proof,
             "The audit path of one of the organization's events in a tree (RFC 9162; admin keys)",
             query=(Param.whole(published.POSITION, True), Param.whole(published.SIZE, True))),
    Endpoint("GET", "/v1/ledger/proofs/consistency", consistency_proof,
             "The proof that a tree extends a smaller one (RFC 9162)", public=True,
             query=(Param.whole(published.FROM, True), Param.whole(published.TO, True))),
    Endpoint("GET", "/v1/ledger/public-key", public_key, "The Ed25519 key checkpoints are signed with (PEM)",
             public=True, answers={"200": ("application/x-pem-file",)}),
)
