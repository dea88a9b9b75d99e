"""The webhook endpoints' routes (admin keys): each handler parses, calls one function of
gateway.webhooks.subscriptions, and renders."""

from aiohttp import web

from gateway.edge.bodies import NO_STORE, json_response, parse_body
from gateway.edge.routes import Endpoint, JsonBody
from gateway.edge.state import CALLER, SERVICES
from gateway.webhooks import subscriptions

BODY_BYTES = 8192
NEW = JsonBody(subscriptions.NewWebhook, BODY_BYTES)
CHANGE = JsonBody(subscriptions.WebhookChange, BODY_BYTES)
PATH = "/v1/webhooks"
ONE = PATH + "/{webhook_id}"


def _manager(request: web.Request) -> subscriptions.Manager:
    services, principal = request.app[SERVICES], request[CALLER].principal
    return subscriptions.Manager(services.webhooks, services.writer.append, services.recorder, principal.org_id,
                                 principal.admin)


async def create_webhook(request: web.Request) -> web.Response:
    manager = _manager(request)
    manager.require_admin()  # before the body: a key that may not, hears so whatever it sent
    _, parsed = await parse_body(request, NEW)
    return json_response(await subscriptions.create(manager, parsed), status=201, headers=NO_STORE)


async def list_webhooks(request: web.Request) -> web.Response:
    return json_response(await subscriptions.listing(_manager(request)), headers=NO_STORE)


async def get_webhook(request: web.Request) -> web.Response:
    body = await subscriptions.detail(_manager(request), request.match_info["webhook_id"])
    return json_response(body, headers=NO_STORE)


async def change_webhook(request: web.Request) -> web.Response:
    manager = _manager(request)
    manager.require_admin()
    _, parsed = await parse_body(request, CHANGE)
    body = await subscriptions.change(manager, request.match_info["webhook_id"], parsed)
    return json_response(body, headers=NO_STORE)


async def delete_webhook(request: web.Request) -> web.Response:
    body = await subscriptions.remove(_manager(request), request.match_info["webhook_id"])
    return json_response(body, headers=NO_STORE)


async def test_webhook(request: web.Request) -> web.Response:
    body = await subscriptions.test(_manager(request), request.match_info["webhook_id"])
    return json_response(body, status=202, headers=NO_STORE)


ACCEPTED = {"202": ("application/json",)}
ENDPOINTS = (
    Endpoint("POST", PATH, create_webhook, "A new webhook endpoint, with its signing secret (admin keys only)",
             body=NEW, answers={"201": ("application/json",)}),
    Endpoint("GET", PATH, list_webhooks, "The organization's webhook endpoints (admin keys only)"),
    Endpoint("GET", ONE, get_webhook, "A webhook endpoint and its latest deliveries (admin keys only)"),
    Endpoint("PATCH", ONE, change_webhook, "Change a webhook endpoint, or enable it again (admin keys only)",
             body=CHANGE),
    Endpoint("DELETE", ONE, delete_webhook, "Remove a webhook endpoint (admin keys only)"),
    Endpoint("POST", ONE + "/test", test_webhook, "Queue a webhook.test delivery to the endpoint (admin keys only)",
             answers=ACCEPTED),
)
