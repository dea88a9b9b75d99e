"""AWS Bedrock Runtime: `adapter` (chat through Converse and ConverseStream, embeddings through
InvokeModel), `auth` (a Bedrock API key, or SigV4 from the AWS credential chain), `converse`
(OpenAI chat bodies as Converse requests), `answers` (Converse answers, usage and AWS's errors as
the gateway's), `events` (ConverseStream's binary event stream as OpenAI chunks), `embeddings`
(Titan and Cohere bodies and answers)."""

from gateway.config import ProviderConfig
from gateway.providers.bedrock.adapter import BedrockProvider
from gateway.providers.bedrock.auth import credentials_findable
from gateway.providers.capabilities import Offer
from gateway.providers.http import Upstream


def offer(provider_id: str, config: ProviderConfig, upstream: Upstream) -> Offer:
    """Chat and embeddings; nothing while no credentials can be found (`credentials_findable`)."""
    if not credentials_findable(config):
        return Offer()
    adapter = BedrockProvider(provider_id, config, upstream)
    return Offer(chat=adapter, embedding=adapter)
