"""Anthropic's Messages API: `adapter` (chat translated both ways, the native Messages API,
count_tokens), `wire` (the Messages format, both ways), `batches` (Message Batches)."""

from gateway.config import ProviderConfig, batch_api
from gateway.providers.anthropic.adapter import AnthropicProvider
from gateway.providers.anthropic.batches import AnthropicBatches
from gateway.providers.capabilities import Offer
from gateway.providers.http import Upstream


def offer(provider_id: str, config: ProviderConfig, upstream: Upstream) -> Offer:
    adapter = AnthropicProvider(provider_id, config, upstream)
    batches = AnthropicBatches(adapter, config, upstream) if batch_api(provider_id, config) else None
    return Offer(chat=adapter, messages=adapter, token_counting=adapter, batch=batches)
