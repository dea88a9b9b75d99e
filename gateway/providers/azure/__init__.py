"""Azure OpenAI (`protocol = "azure"`): `adapter` (OpenAI's wire on the v1 API or the deployments
path, the `api-key` header or an Entra ID token; chat, text completions, Responses, embeddings,
speech and transcription), `entra` (Entra ID's client-credentials token, renewed before it lapses)."""

from gateway.config import ProviderConfig
from gateway.providers.azure.adapter import AzureProvider
from gateway.providers.capabilities import Offer
from gateway.providers.http import Upstream
from gateway.providers.openai.responses import OpenAIResponses


def offer(provider_id: str, config: ProviderConfig, upstream: Upstream) -> Offer:
    """An Azure resource's adapter; ConfigError when its Entra ID credentials are partly set.
    Nothing while no resource is named (the shipped provider's base_url is AZURE_OPENAI_BASE_URL,
    empty when unset): a model's other providers must not fail over to a resource that is not there."""
    adapter = AzureProvider(provider_id, config, upstream)
    if not config.base_url:
        return Offer()
    return Offer(chat=adapter, responses=OpenAIResponses(adapter), completion=adapter, embedding=adapter,
                 speech=adapter, transcription=adapter)
