"""The Azure OpenAI adapter: OpenAI's wire (gateway.providers.openai) at an Azure resource.

Two ways in. The v1 API (`api_version` empty; base_url `https://RES.openai.azure.com/openai/v1`)
is OpenAI's paths with the deployment as the body's `model`. The deployments path (`api_version`
set; base_url `.../openai`) puts the deployment in the path,
`/deployments/{deployment}/chat/completions?api-version=...`, and Responses at
`/responses?api-version=...` with the deployment as the body's model. Either way the deployment
is the catalogue entry's modelName, so a deployment is priced as the model it serves.

Credentials: the `api-key` header (an organization's own key, BYOK, in place of the configured
one), or an Entra ID bearer token (gateway.providers.azure.entra), forgotten when Azure answers 401
so the next request fetches a new one. A chat stream opens with a chunk of no choices (and an
empty id) carrying only Azure's prompt-filter results; it is dropped, and the usage is asked for
as OpenAI's is, so a stream is billed like any other.
"""

from collections.abc import AsyncIterator
from urllib.parse import quote

import aiohttp
import yarl

from gateway.config import ProviderConfig
from gateway.edge.errors import UpstreamError
from gateway.providers.azure.entra import EntraToken, configured
from gateway.providers.http import Upstream
from gateway.providers.openai.adapter import OpenAIChatStream, OpenAIProvider, OpenAITextStream

PROVIDER = "azure"
# The operations that live under a deployment on the deployments path (Responses does not).
DEPLOYED = frozenset({"/chat/completions", "/completions", "/embeddings", "/audio/speech", "/audio/transcriptions"})


class AzureChatStream(OpenAIChatStream):
    """OpenAI's chat chunks as Azure streams them, its opening prompt-filter chunk dropped."""

    provider = PROVIDER
    drops_empty = True


class AzureTextStream(OpenAITextStream):
    """A text completion's chunks as Azure streams them, its opening prompt-filter chunk dropped."""

    provider = PROVIDER
    drops_empty = True


def deployment_url(base: str, api_version: str, path: str, deployment: str) -> str:
    """`path` on the deployments API: under `/deployments/{deployment}` (percent-encoded) unless it
    is one of the resource's own operations (Responses), with the `api-version` query."""
    where = f"{base}/deployments/{quote(deployment, safe='')}{path}" if path in DEPLOYED else base + path
    return str(yarl.URL(where, encoded=True).update_query({"api-version": api_version}))


class AzureProvider(OpenAIProvider):
    """OpenAI's adapter addressed and authorized the Azure way (the module's docstring)."""

    chat_stream = AzureChatStream
    text_stream = AzureTextStream

    def __init__(self, provider_id: str, config: ProviderConfig, upstream: Upstream) -> None:
        """ConfigError when Entra ID's tenant_id, client_id and client_secret are not all or none set."""
        self._entra = EntraToken(config, upstream) if configured(config) else None
        super().__init__(provider_id, config, upstream)
        self._api_version = config.api_version

    def url(self, path: str, upstream_model: str) -> str:
        if not self._api_version:
            return self._base + path
        return deployment_url(self._base, self._api_version, path, upstream_model)

    def headers(self, api_key: str = "", content_type: str | None = "application/json") -> dict[str, str]:
        """Azure's `api-key` header: the org's own key when it has one (BYOK), else the gateway's."""
        headers = {"Content-Type": content_type} if content_type else {}
        if key := api_key or self._api_key:
            headers["api-key"] = key
        return headers

    async def request_headers(self, api_key: str = "", content_type: str = "application/json") -> dict[str, str]:
        """An org's own key as `api-key`; else the Entra ID token when configured; else the gateway's key."""
        if api_key or self._entra is None:
            return self.headers(api_key, content_type)
        return {"Content-Type": content_type, "Authorization": f"Bearer {await self._entra.get()}"}

    async def send(self, path: str, upstream_model: str, data: bytes | AsyncIterator[bytes], api_key: str = "",
                   content_type: str = "application/json") -> aiohttp.ClientResponse:
        try:
            return await super().send(path, upstream_model, data, api_key, content_type)
        except UpstreamError as exc:
            if exc.status == 401 and self._entra is not None and not api_key:
                self._entra.forget()  # revoked or expired early: the next request asks Entra anew
            raise
