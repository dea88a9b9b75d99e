"""Google's OAuth 2.0 token endpoint for service accounts, and the store of the tokens it issues.

``POST /token`` (a service account file's ``token_uri`` is ``{simulator}/token``) takes the form
``grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=<JWT>`` and verifies the JWT
as Google does: RS256 signed by `cloud_credentials.SERVICE_ACCOUNT_PRIVATE_KEY`, header ``kid`` =
SERVICE_ACCOUNT_KEY_ID, ``iss`` = SERVICE_ACCOUNT_EMAIL, ``aud`` = Google's token URI
``https://oauth2.googleapis.com/token`` (what google-auth signs, whatever ``token_uri`` says) or the
URL it was posted to, ``exp - iat`` at most an hour and not expired, ``scope`` holding CLOUD_PLATFORM_SCOPE. It answers
``{"access_token": "ya29.sim-...", "expires_in": N, "token_type": "Bearer"}``, or 400
``{"error": "invalid_grant", "error_description": ...}``.

`TokenStore` (also the Entra ID endpoint's) remembers every token issued and its expiry, on the
app. Control routes (unauthenticated):

    GET  /_sim/google/tokens          {"issued": N, "lifetime_s": S}  tokens issued so far
    POST /_sim/google/token-lifetime  {"seconds": S}  the lifetime of tokens issued from now on
"""

import secrets
import time
from typing import Annotated, Any

import msgspec
import orjson
from aiohttp import web
from cryptography.hazmat.primitives import serialization
from google.auth import exceptions as google_exceptions
from google.auth import jwt

from simulator.cloud_credentials import SERVICE_ACCOUNT_EMAIL, SERVICE_ACCOUNT_KEY_ID, SERVICE_ACCOUNT_PRIVATE_KEY

TOKEN_PATH = "/token"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
GOOGLE_TOKEN_URI = "https://oauth2.googleapis.com/token"
DEFAULT_LIFETIME_S = 3600
MAX_ASSERTION_S = 3600
CLOCK_SKEW_S = 60


def _public_key_pem(private_pem: str) -> bytes:
    """The PEM of the public half of `private_pem`."""
    key = serialization.load_pem_private_key(private_pem.encode(), password=None)
    return key.public_key().public_bytes(serialization.Encoding.PEM,
                                         serialization.PublicFormat.SubjectPublicKeyInfo)


SERVICE_ACCOUNT_PUBLIC_KEY = _public_key_pem(SERVICE_ACCOUNT_PRIVATE_KEY)


class TokenStore:
    """Access tokens issued on one app: each token's expiry (epoch seconds), how many were
    issued, and the lifetime of the next ones."""

    def __init__(self, prefix: str, lifetime_s: int) -> None:
        self.prefix = prefix
        self.lifetime_s = lifetime_s
        self.issued = 0
        self._expiry: dict[str, float] = {}

    def issue(self, token: str | None = None) -> str:
        """A new token (`prefix` + random, unless `token` is given), valid for `lifetime_s`."""
        token = token or f"{self.prefix}{secrets.token_urlsafe(32)}"
        self._expiry[token] = time.time() + self.lifetime_s
        self.issued += 1
        return token

    def valid(self, token: str) -> bool:
        """Whether `token` was issued here and has not expired."""
        return time.time() < self._expiry.get(token, 0.0)

    def summary(self) -> dict[str, int]:
        return {"issued": self.issued, "lifetime_s": self.lifetime_s}


GOOGLE_TOKENS_KEY = web.AppKey("google_tokens", TokenStore)


class InvalidGrant(ValueError):
    """An assertion Google would refuse; the message says why."""


def verify_assertion(assertion: str, audience: list[str], now: float | None = None) -> dict[str, Any]:
    """The claims of a service account's JWT `assertion` for one of `audience`; InvalidGrant
    when its signature, key id, issuer, audience, times or scope are wrong."""
    try:
        header = jwt.decode_header(assertion)
        claims = jwt.decode(assertion, certs=SERVICE_ACCOUNT_PUBLIC_KEY.decode(), audience=audience,
                            clock_skew_in_seconds=CLOCK_SKEW_S)
    except (ValueError, google_exceptions.GoogleAuthError) as exc:
        raise InvalidGrant(f"Invalid JWT: {exc}") from exc
    if header.get("alg") != "RS256" or header.get("kid") != SERVICE_ACCOUNT_KEY_ID:
        raise InvalidGrant("Invalid JWT Signature.")
    if claims.get("iss") != SERVICE_ACCOUNT_EMAIL:
        raise InvalidGrant("Invalid JWT: iss is not a known service account.")
    _check_times(claims, time.time() if now is None else now)
    if CLOUD_PLATFORM_SCOPE not in str(claims.get("scope", "")).split():
        raise InvalidGrant(f"Invalid JWT: scope must include {CLOUD_PLATFORM_SCOPE}.")
    return claims


def _check_times(claims: dict[str, Any], now: float) -> None:
    iat, exp = claims.get("iat"), claims.get("exp")
    if not isinstance(iat, int) or not isinstance(exp, int):
        raise InvalidGrant("Invalid JWT: iat and exp are required.")
    if exp - iat > MAX_ASSERTION_S or exp <= iat:
        raise InvalidGrant("Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe.")
    if exp < now - CLOCK_SKEW_S or iat > now + CLOCK_SKEW_S:
        raise InvalidGrant("Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe.")


def token_body(tokens: TokenStore) -> dict[str, Any]:
    """A newly issued token as Google's endpoints answer it."""
    return {"access_token": tokens.issue(), "expires_in": tokens.lifetime_s, "token_type": "Bearer"}


def invalid_grant(description: str) -> web.Response:
    body = {"error": "invalid_grant", "error_description": description}
    return web.Response(status=400, body=orjson.dumps(body), content_type="application/json")


async def token(request: web.Request) -> web.Response:
    """POST /token: exchange a signed service-account assertion for an access token."""
    form = await request.post()
    if form.get("grant_type") != JWT_BEARER:
        body = {"error": "unsupported_grant_type", "error_description": "Invalid grant_type."}
        return web.Response(status=400, body=orjson.dumps(body), content_type="application/json")
    audience = [GOOGLE_TOKEN_URI, f"{request.scheme}://{request.host}{request.path}"]
    try:
        verify_assertion(str(form.get("assertion", "")), audience)
    except InvalidGrant as exc:
        return invalid_grant(str(exc))
    return web.json_response(token_body(request.app[GOOGLE_TOKENS_KEY]))


class Lifetime(msgspec.Struct, forbid_unknown_fields=True):
    seconds: Annotated[int, msgspec.Meta(ge=1)]


async def set_lifetime(store: TokenStore, request: web.Request) -> web.Response:
    """Set `store`'s token lifetime from a ``{"seconds": S}`` body; 400 when it is not one."""
    try:
        store.lifetime_s = msgspec.json.decode(await request.read(), type=Lifetime).seconds
    except msgspec.DecodeError as exc:
        return web.json_response({"error": str(exc)}, status=400)
    return web.json_response(store.summary())


async def google_tokens(request: web.Request) -> web.Response:
    """GET /_sim/google/tokens -> how many access tokens were issued, and their lifetime."""
    return web.json_response(request.app[GOOGLE_TOKENS_KEY].summary())


async def google_token_lifetime(request: web.Request) -> web.Response:
    """POST /_sim/google/token-lifetime ``{"seconds": S}``: the lifetime of tokens issued next."""
    return await set_lifetime(request.app[GOOGLE_TOKENS_KEY], request)


def add_routes(app: web.Application) -> None:
    """Mount the token endpoint and its control routes; the token store goes on `app`."""
    app[GOOGLE_TOKENS_KEY] = TokenStore("ya29.sim-", DEFAULT_LIFETIME_S)
    app.router.add_post(TOKEN_PATH, token)
    app.router.add_get("/_sim/google/tokens", google_tokens)
    app.router.add_post("/_sim/google/token-lifetime", google_token_lifetime)
