"""Microsoft Entra ID's client-credentials grant: the bearer token Azure OpenAI takes instead of an
api-key, fetched through the gateway's own client session and kept until shortly before it lapses.

azure-identity is not used: its authority must be https and it asks login.microsoftonline.com for
instance discovery, where an operator's `authority_host` (a sovereign cloud, a test server) must be
the only host contacted. The grant is one form POST to `{authority_host}/{tenant_id}/oauth2/v2.0/token`.
"""

from urllib.parse import quote

import aiohttp

from gateway.accounts.redaction import forms_of, redact
from gateway.config import ConfigError, ProviderConfig
from gateway.edge.errors import UpstreamError
from gateway.jsonio import loads
from gateway.providers.http import ERROR_BODY_BYTES, MESSAGE_CHARS, Upstream, timeout_for
from gateway.providers.tokens import Lapsing, RenewedCredential

PUBLIC_CLOUD = "https://login.microsoftonline.com"
SCOPE = "https://cognitiveservices.azure.com/.default"  # Azure OpenAI's audience
FIELDS = ("tenant_id", "client_id", "client_secret")
FAILED = "azure could not get an Entra ID token"


def configured(config: ProviderConfig) -> bool:
    """Whether `config` asks for Entra ID: all of tenant_id, client_id and client_secret set, or
    none of them; ConfigError naming the missing ones when only some are."""
    given = [field for field in FIELDS if getattr(config, field)]
    if given and len(given) < len(FIELDS):
        missing = ", ".join(field for field in FIELDS if field not in given)
        raise ConfigError(f"an azure provider's Entra ID credentials need tenant_id, client_id and client_secret"
                          f" together: {missing} not set")
    return bool(given)


def lifetime(body: dict) -> float:
    """The token's `expires_in` in seconds (Entra sends a number; its v1 endpoint sent a string)."""
    value = body.get("expires_in")
    try:
        seconds = float(value) if isinstance(value, int | float | str) and not isinstance(value, bool) else -1.0
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise UpstreamError(502, f"{FAILED}: the answer has no expires_in", reason="connection")
    return seconds


def issued(body: dict) -> Lapsing[str]:
    """The access token of a 200 answer, good for its `expires_in`; UpstreamError 502 otherwise."""
    token = body.get("access_token")
    if not isinstance(token, str) or not token:
        raise UpstreamError(502, f"{FAILED}: the answer has no access_token", reason="connection")
    return Lapsing.lasting(token, lifetime(body))


def refusal(status: int, text: str) -> str:
    """Why Entra refused, in its own words: the first line of `error_description` (its AADSTS
    code and description; the trace ids after it say nothing to an operator), else `error`."""
    try:
        body = loads(text)
    except ValueError:
        body = None
    if not isinstance(body, dict):
        return f"status {status}"
    description = body.get("error_description") or body.get("error") or f"status {status}"
    return str(description).strip().splitlines()[0] if str(description).strip() else f"status {status}"


class EntraToken:
    """An Entra ID access token for Azure OpenAI, renewed before it lapses, one fetch at a time
    (gateway.providers.tokens); `forget` when Azure refuses it."""

    def __init__(self, config: ProviderConfig, upstream: Upstream) -> None:
        authority = (config.authority_host or PUBLIC_CLOUD).rstrip("/")
        self._url = f"{authority}/{quote(config.tenant_id, safe='')}/oauth2/v2.0/token"
        self._form = {"grant_type": "client_credentials", "client_id": config.client_id,
                      "client_secret": config.client_secret, "scope": SCOPE}
        self._secret = forms_of([config.client_secret])  # never in a message, whatever Entra echoes
        self._session = upstream.session  # the provider's extra headers are Azure's, not Entra's
        self._timeout = timeout_for(config)
        self._held = RenewedCredential(self._fetch)

    async def get(self) -> str:
        """A token good now and for a while; UpstreamError when Entra will not issue one."""
        return await self._held.get()

    def forget(self) -> None:
        """Drop the token held (Azure refused it), so the next request fetches a new one."""
        self._held.forget()

    async def _fetch(self) -> Lapsing[str]:
        try:
            async with self._session.post(self._url, data=self._form, timeout=self._timeout) as response:
                status, text = response.status, (await response.read())[:ERROR_BODY_BYTES].decode(errors="replace")
        except TimeoutError:
            raise UpstreamError(504, f"{FAILED}: Entra ID did not answer in time", reason="timeout") from None
        except aiohttp.ClientError as exc:
            raise UpstreamError(502, f"{FAILED}: {type(exc).__name__}", reason="connection") from None
        if status != 200:
            message = redact(f"{FAILED}: {refusal(status, text)}", self._secret)[:MESSAGE_CHARS]
            raise UpstreamError(502, message, reason="connection")
        return issued(self._parsed(text))

    @staticmethod
    def _parsed(text: str) -> dict:
        try:
            body = loads(text)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise UpstreamError(502, f"{FAILED}: the answer is not a JSON object", reason="connection")
        return body
