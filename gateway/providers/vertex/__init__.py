"""Google Vertex AI (being built)."""

from gateway.config import ProviderConfig
from gateway.providers.capabilities import Offer
from gateway.providers.http import Upstream


def offer(provider_id: str, config: ProviderConfig, upstream: Upstream) -> Offer:
    return Offer()
