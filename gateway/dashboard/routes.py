"""The dashboard's routes: its JSON API (GET /v1/usage, the request log at /v1/logs, the
organization's keys at /v1/keys) and its page (/dashboard). Each API handler parses, calls one
function of gateway.dashboard, and renders; account data is never cached."""

from aiohttp import web

from gateway.edge.bodies import NO_STORE, json_response, parse_body
from gateway.dashboard import org_keys, page, request_log, usage
from gateway.edge.state import CALLER, SERVICES

KEY_BODY_BYTES = 4096


async def usage_overview(request: web.Request) -> web.Response:
    days = usage.DAYS.read(request.query)
    body = await usage.overview(request.app[SERVICES], request[CALLER], days)
    return json_response(body, headers=NO_STORE)


async def list_logs(request: web.Request) -> web.Response:
    query = request_log.parse_query(request.query)
    body = await request_log.page(request.app[SERVICES], request[CALLER], query)
    return json_response(body, headers=NO_STORE)


async def get_log(request: web.Request) -> web.Response:
    body = await request_log.detail(request.app[SERVICES], request[CALLER], request.match_info["log_id"])
    return json_response(body, headers=NO_STORE)


async def change_key_limits(request: web.Request) -> web.Response:
    _, parsed = await parse_body(request, org_keys.LimitsChange, KEY_BODY_BYTES)
    return json_response(await org_keys.change_limits(request.app[SERVICES], request[CALLER],
                                                      request.match_info["key_id"], parsed))


async def list_keys(request: web.Request) -> web.Response:
    body = await org_keys.listing(request.app[SERVICES], request[CALLER])
    return json_response(body, headers=NO_STORE)


async def create_key(request: web.Request) -> web.Response:
    _, parsed = await parse_body(request, org_keys.NewKey, KEY_BODY_BYTES)
    body = await org_keys.create(request.app[SERVICES], request[CALLER], parsed)
    return json_response(body, status=201, headers=NO_STORE)


async def revoke_key(request: web.Request) -> web.Response:
    return json_response(await org_keys.revoke(request.app[SERVICES], request[CALLER], request.match_info["key_id"]))


def setup_routes(app: web.Application) -> None:
    app.router.add_get("/v1/usage", usage_overview)
    app.router.add_get("/v1/logs", list_logs)
    app.router.add_get("/v1/logs/{log_id}", get_log)
    app.router.add_get("/v1/keys", list_keys)
    app.router.add_post("/v1/keys", create_key)
    app.router.add_delete("/v1/keys/{key_id}", revoke_key)
    app.router.add_patch("/v1/keys/{key_id}", change_key_limits)
    app.router.add_get("/dashboard", page.page)
    app.router.add_get("/dashboard/", page.page)
    app.router.add_get("/dashboard/static/{name}", page.asset)
