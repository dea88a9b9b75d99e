"""The dashboard's routes: its JSON API (GET /v1/usage, the request log at /v1/logs, the
organization's keys at /v1/keys, its monthly statements at /v1/statements, its batches at
/v1/dashboard/batches) and its page
(/dashboard). Each API handler parses, calls one function of gateway.dashboard, and renders;
account data is never cached. The page and its files are public; the API is keyed."""

from aiohttp import web

from gateway.dashboard import batches, org_keys, page, request_log, statements, usage
from gateway.edge.bodies import NO_STORE, json_response, parse_body
from gateway.edge.parsing import LOG_ID_PATTERN
from gateway.edge.routes import Endpoint, JsonBody, Param
from gateway.edge.state import CALLER, SERVICES

KEY_BODY_BYTES = 4096
NEW_KEY = JsonBody(org_keys.NewKey, KEY_BODY_BYTES)
LIMITS_CHANGE = JsonBody(org_keys.LimitsChange, KEY_BODY_BYTES)
LOGS, KEYS, PAGE = "/v1/logs", "/v1/keys", "/dashboard"
FORMAT = Param("format", {"type": "string", "enum": list(statements.FORMATS)},
               "json (the default) or csv: the charges by day, key and model (as Accept: text/csv)")


async def usage_overview(request: web.Request) -> web.Response:
    days = usage.DAYS.read(request.query)
    body = await usage.overview(request.app[SERVICES], request[CALLER], days)
    return json_response(body, headers=NO_STORE)


async def get_statement(request: web.Request) -> web.Response:
    month = statements.parse_month(request.match_info["month"])
    recorder, org_id = request.app[SERVICES].recorder, request[CALLER].org_id
    if not statements.wants_csv(request.query, request.headers.get("Accept", "")):
        return json_response(await statements.statement(recorder, org_id, month), headers=NO_STORE)
    disposition = f'attachment; filename="statement-{month.text}.csv"'  # month: checked digits
    return web.Response(text=await statements.charges_csv(recorder, org_id, month), content_type="text/csv",
                        headers={**NO_STORE, "Content-Disposition": disposition})


async def list_logs(request: web.Request) -> web.Response:
    query = request_log.parse_query(request.query)
    body = await request_log.page(request.app[SERVICES], request[CALLER], query)
    return json_response(body, headers=NO_STORE)


async def get_log(request: web.Request) -> web.Response:
    body = await request_log.detail(request.app[SERVICES], request[CALLER], request.match_info["log_id"])
    return json_response(body, headers=NO_STORE)


async def list_batches(request: web.Request) -> web.Response:
    limit = batches.LIMIT.read(request.query)
    body = await batches.page(request.app[SERVICES], request[CALLER], limit, request.query.get("before"))
    return json_response(body, headers=NO_STORE)


async def change_key_limits(request: web.Request) -> web.Response:
    _, parsed = await parse_body(request, LIMITS_CHANGE)
    return json_response(await org_keys.change_limits(request.app[SERVICES], request[CALLER],
                                                      request.match_info["key_id"], parsed))


async def list_keys(request: web.Request) -> web.Response:
    body = await org_keys.listing(request.app[SERVICES], request[CALLER])
    return json_response(body, headers=NO_STORE)


async def create_key(request: web.Request) -> web.Response:
    _, parsed = await parse_body(request, NEW_KEY)
    body = await org_keys.create(request.app[SERVICES], request[CALLER], parsed)
    return json_response(body, status=201, headers=NO_STORE)


async def revoke_key(request: web.Request) -> web.Response:
    return json_response(await org_keys.revoke(request.app[SERVICES], request[CALLER], request.match_info["key_id"]))


HTML = {"200": ("text/html",)}
ENDPOINTS = (
    Endpoint("GET", "/v1/usage", usage_overview, "Balance, spend and errors", query=(Param.whole(usage.DAYS),)),
    Endpoint("GET", LOGS, list_logs, "The request log, newest first", query=(
        Param.whole(request_log.LIMIT),
        Param("before", {"type": "string", "pattern": LOG_ID_PATTERN}, "a page's next_cursor"),
        Param("route"), Param("model"), Param.whole(request_log.STATUS))),
    Endpoint("GET", LOGS + "/{log_id}", get_log,
             "One request of the log: the provider that answered, every attempt, and its text if kept"),
    Endpoint("GET", "/v1/statements/{month}", get_statement,
             "A UTC month's statement (YYYY-MM): balances, credits, charges by model, key and day",
             query=(FORMAT,), answers={"200": ("application/json", "text/csv")}),
    Endpoint("GET", "/v1/dashboard/batches", list_batches,
             "The organization's batches of both APIs, newest first: status, progress, cost so far, files",
             query=(Param.whole(batches.LIMIT), Param("before", {"type": "string"}, "a page's next_cursor"))),
    Endpoint("GET", KEYS, list_keys, "The organization's API keys"),
    Endpoint("POST", KEYS, create_key, "A new API key (admin keys only)", body=NEW_KEY,
             answers={"201": ("application/json",)}),
    Endpoint("DELETE", KEYS + "/{key_id}", revoke_key, "Revoke an API key (admin keys only)"),
    Endpoint("PATCH", KEYS + "/{key_id}", change_key_limits, "Change a key's spend controls (admin keys only)",
             body=LIMITS_CHANGE),
    Endpoint("GET", PAGE, page.page, "The dashboard page", public=True, answers=HTML),
    Endpoint("GET", PAGE + "/", page.page, "The dashboard page", public=True, answers=HTML),
    Endpoint("GET", PAGE + "/static/{name}", page.asset, "A dashboard file", public=True,
             answers={"200": ("text/javascript",)}),
)
