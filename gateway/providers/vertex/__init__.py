"""Google Vertex AI: Gemini and Claude models of a Google Cloud project. `adapter` (chat, each
model through its publisher's wire: Gemini's generateContent, Anthropic's Messages as
rawPredict), `access` (the Application Default Credentials' access token, renewed before it
expires, and their project)."""

from gateway.config import ProviderConfig
from gateway.providers.capabilities import Offer
from gateway.providers.http import Upstream
from gateway.providers.vertex.access import credentials_findable
from gateway.providers.vertex.adapter import VertexProvider


def offer(provider_id: str, config: ProviderConfig, upstream: Upstream) -> Offer:
    """Chat; nothing while no credentials can be found (`access.credentials_findable`)."""
    if not credentials_findable(config.credentials_file):
        return Offer()
    return Offer(chat=VertexProvider(provider_id, config, upstream))
