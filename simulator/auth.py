"""Credential check for ``/v1/`` routes: the simulator accepts any non-empty key, but demands one.

Gateways must forward a provider key; a request without one is a gateway bug the
tests should see, so it gets the provider's 401 rather than a silent success.
"""

from collections.abc import Awaitable, Callable

from aiohttp import web

from simulator.openai_wire import error_response

PROTECTED_PREFIX = "/v1/"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def bearer_token(request: web.Request) -> str:
    """The token of an ``Authorization: Bearer <token>`` header, "" when absent or malformed."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


@web.middleware
async def auth_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Answer 401 (OpenAI-style) to ``/v1/`` requests without a non-empty bearer token."""
    if request.path.startswith(PROTECTED_PREFIX) and not bearer_token(request):
        return error_response(
            401,
            "Incorrect API key provided: send 'Authorization: Bearer <key>' with a non-empty key.",
            code="invalid_api_key",
        )
    return await handler(request)
