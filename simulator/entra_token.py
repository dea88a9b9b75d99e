"""Microsoft Entra ID's token endpoint, client-credentials grant, for Azure OpenAI's bearer tokens.

``POST /{tenant}/oauth2/v2.0/token`` with the form ``grant_type=client_credentials&client_id=...
&client_secret=...&scope=https://cognitiveservices.azure.com/.default`` answers
``{"token_type": "Bearer", "expires_in": 3599, "ext_expires_in": 3599, "access_token": <JWT-looking,
unsigned: not to be parsed by clients>}`` when tenant, client and secret are `cloud_credentials`'
AZURE_TENANT_ID, AZURE_CLIENT_ID and AZURE_CLIENT_SECRET. Otherwise Entra's error
``{"error", "error_description": "AADSTS...", "error_codes": [...]}``: an unknown tenant 400
invalid_request (AADSTS90002), an unknown client 400 unauthorized_client (AADSTS700016), a wrong
secret 401 invalid_client (AADSTS7000215), another scope 400 invalid_scope (AADSTS1002012), another
grant 400 unsupported_grant_type (AADSTS70003).

``GET /{tenant}/v2.0/.well-known/openid-configuration`` names the token endpoint (MSAL reads it).
Control routes (unauthenticated):

    GET  /_sim/entra/tokens          {"issued": N, "lifetime_s": S}
    POST /_sim/entra/token-lifetime  {"seconds": S}   the lifetime of tokens issued from now on
"""

import base64
import secrets
import time
import uuid
from typing import Any

import orjson
from aiohttp import web

from simulator.cloud_credentials import AZURE_CLIENT_ID, AZURE_CLIENT_SECRET, AZURE_TENANT_ID
from simulator.google_token import TokenStore, set_lifetime

TOKEN_ROUTE = "/{tenant}/oauth2/v2.0/token"
OPENID_ROUTE = "/{tenant}/v2.0/.well-known/openid-configuration"
SCOPE = "https://cognitiveservices.azure.com/.default"
AUDIENCE = "https://cognitiveservices.azure.com"
DEFAULT_LIFETIME_S = 3599

ENTRA_TOKENS_KEY = web.AppKey("entra_tokens", TokenStore)


class EntraError(Exception):
    """A refused token request: HTTP status, Entra's error and AADSTS code, description."""

    def __init__(self, status: int, error: str, code: int, description: str) -> None:
        super().__init__(description)
        self.status, self.error, self.code, self.description = status, error, code, description

    def response(self) -> web.Response:
        body = {"error": self.error, "error_description": f"AADSTS{self.code}: {self.description}",
                "error_codes": [self.code], "timestamp": time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime()),
                "trace_id": str(uuid.uuid4()), "correlation_id": str(uuid.uuid4())}
        return web.Response(status=self.status, body=orjson.dumps(body), content_type="application/json")


def check_grant(tenant: str, form: Any) -> None:
    """Nothing when `form` is a valid client-credentials grant in `tenant`; EntraError otherwise."""
    if tenant != AZURE_TENANT_ID:
        raise EntraError(400, "invalid_request", 90002, f"Tenant '{tenant}' not found.")
    if form.get("grant_type") != "client_credentials":
        raise EntraError(400, "unsupported_grant_type", 70003, "The app requested an unsupported grant type.")
    client = form.get("client_id")
    if client != AZURE_CLIENT_ID:
        raise EntraError(400, "unauthorized_client", 700016,
                         f"Application with identifier '{client}' was not found in the directory.")
    if form.get("client_secret") != AZURE_CLIENT_SECRET:
        raise EntraError(401, "invalid_client", 7000215,
                         "Invalid client secret provided. Ensure the secret being sent in the request is the"
                         f" client secret value, not the client secret ID, for a secret added to app '{client}'.")
    if form.get("scope") != SCOPE:
        raise EntraError(400, "invalid_scope", 1002012,
                         f"The provided value for scope {form.get('scope')} is not valid.")


def _b64(value: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(orjson.dumps(value)).rstrip(b"=").decode()


def jwt_looking_token(lifetime_s: int) -> str:
    """An opaque access token shaped like Entra's JWTs (its signature is random)."""
    now = int(time.time())
    claims = {"aud": AUDIENCE, "iss": f"https://sts.windows.net/{AZURE_TENANT_ID}/", "iat": now, "nbf": now,
              "exp": now + lifetime_s, "appid": AZURE_CLIENT_ID, "tid": AZURE_TENANT_ID, "uti": secrets.token_hex(8)}
    return f"{_b64({'typ': 'JWT', 'alg': 'RS256', 'kid': 'sim'})}.{_b64(claims)}.{secrets.token_urlsafe(32)}"


async def token(request: web.Request) -> web.Response:
    """POST /{tenant}/oauth2/v2.0/token: a client-credentials grant -> an access token."""
    try:
        check_grant(request.match_info["tenant"], await request.post())
    except EntraError as exc:
        return exc.response()
    store = request.app[ENTRA_TOKENS_KEY]
    access_token = store.issue(jwt_looking_token(store.lifetime_s))
    return web.json_response({"token_type": "Bearer", "expires_in": store.lifetime_s,
                              "ext_expires_in": store.lifetime_s, "access_token": access_token})


async def openid_configuration(request: web.Request) -> web.Response:
    """GET /{tenant}/v2.0/.well-known/openid-configuration -> the tenant's endpoints."""
    tenant = request.match_info["tenant"]
    base = f"{request.scheme}://{request.host}/{tenant}"
    return web.json_response({"token_endpoint": f"{base}/oauth2/v2.0/token",
                              "authorization_endpoint": f"{base}/oauth2/v2.0/authorize",
                              "issuer": f"{request.scheme}://{request.host}/{tenant}/v2.0",
                              "token_endpoint_auth_methods_supported": ["client_secret_post"]})


async def entra_tokens(request: web.Request) -> web.Response:
    """GET /_sim/entra/tokens -> how many access tokens were issued, and their lifetime."""
    return web.json_response(request.app[ENTRA_TOKENS_KEY].summary())


async def entra_token_lifetime(request: web.Request) -> web.Response:
    """POST /_sim/entra/token-lifetime ``{"seconds": S}``: the lifetime of tokens issued next."""
    return await set_lifetime(request.app[ENTRA_TOKENS_KEY], request)


def add_routes(app: web.Application) -> None:
    """Mount the token endpoint, the tenant's discovery document and the control routes."""
    app[ENTRA_TOKENS_KEY] = TokenStore("", DEFAULT_LIFETIME_S)
    app.router.add_post(TOKEN_ROUTE, token)
    app.router.add_get(OPENID_ROUTE, openid_configuration)
    app.router.add_get("/_sim/entra/tokens", entra_tokens)
    app.router.add_post("/_sim/entra/token-lifetime", entra_token_lifetime)
