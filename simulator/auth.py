"""Credential checks for the provider routes: any non-empty key is accepted, but one is demanded.

Gateways must forward a provider key; a request without one is a gateway bug the
tests should see, so it gets the provider's own 401 rather than a silent success.

    /v1/messages  Anthropic (and under it): ``x-api-key: <key>``
    /v1/*         OpenAI: ``Authorization: Bearer <key>`` (but not /v1/projects/*: Vertex AI's
                  routes check their Google access tokens themselves)
    /v1beta/*     Gemini: ``x-goog-api-key: <key>`` header, or the ``key`` query parameter

With the ``echo_key`` setting every provider request is refused with that 401, quoting the
key it carried the way providers do.
"""

from collections.abc import Awaitable, Callable
from typing import NamedTuple
from urllib.parse import quote

from aiohttp import web

from simulator import anthropic_wire, gemini_wire, openai_wire
from simulator.settings import SETTINGS_KEY

ANTHROPIC_PATH = "/v1/messages"
OPENAI_PREFIX = "/v1/"
GEMINI_PREFIX = "/v1beta/"
VERTEX_PREFIX = "/v1/projects/"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def bearer_token(request: web.Request) -> str:
    """The token of an ``Authorization: Bearer <token>`` header, "" when absent or malformed."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def goog_api_key(request: web.Request) -> str:
    """The Gemini API key: the ``x-goog-api-key`` header, else ``?key=``; "" when neither is set."""
    return request.headers.get("x-goog-api-key", "").strip() or request.query.get("key", "").strip()


class RouteFamily(NamedTuple):
    """A provider's routes: how they carry the key, what their 401 says without one, and that
    401 with a given message in the provider's error format."""

    key: Callable[[web.Request], str]
    missing: str
    unauthorized: Callable[[str], web.Response]


ANTHROPIC = RouteFamily(
    lambda request: request.headers.get("x-api-key", "").strip(),
    "x-api-key header is required",
    lambda message: anthropic_wire.error_response(401, message))
OPENAI = RouteFamily(
    bearer_token,
    "Incorrect API key provided: send 'Authorization: Bearer <key>' with a non-empty key.",
    lambda message: openai_wire.error_response(401, message, code="invalid_api_key"))
GEMINI = RouteFamily(
    goog_api_key,
    "Method requires an API key: send 'x-goog-api-key: <key>' or '?key=<key>'.",
    lambda message: gemini_wire.error_response(401, message))


def route_family(request: web.Request) -> RouteFamily | None:
    """The provider whose routes `request` is for; None for the simulator's own routes."""
    if request.path == ANTHROPIC_PATH or request.path.startswith(ANTHROPIC_PATH + "/"):  # count_tokens
        return ANTHROPIC
    if request.path.startswith(OPENAI_PREFIX) and not request.path.startswith(VERTEX_PREFIX):
        return OPENAI
    if request.path.startswith(GEMINI_PREFIX):
        return GEMINI
    return None


def credential_error(request: web.Request) -> web.Response | None:
    """The provider's 401 when `request` lacks the credential its route family needs, else None."""
    family = route_family(request)
    if family is None or family.key(request):
        return None
    return family.unauthorized(family.missing)


def received_key(request: web.Request) -> str:
    """The key a provider request carried, whichever way its route family sends it."""
    return ANTHROPIC.key(request) or bearer_token(request) or goog_api_key(request)


def echoed_key_error(request: web.Request) -> web.Response | None:
    """A 401 quoting the key received (as it is, as a bearer header, URL-encoded), in the
    route family's format; None for a request that is not a provider request."""
    family = route_family(request)
    if family is None:
        return None
    key = received_key(request)
    return family.unauthorized(f"Incorrect API key provided: {key}. Sent as 'Authorization: Bearer {key}'"
                               f" (url: key={quote(key, safe='')}).")


@web.middleware
async def auth_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Answer 401 (in the route family's format) to provider requests without a credential,
    or to every provider request when the `echo_key` setting is on."""
    error = credential_error(request)
    if error is None and request.app[SETTINGS_KEY].echo_key:
        error = echoed_key_error(request)
    return error if error is not None else await handler(request)
