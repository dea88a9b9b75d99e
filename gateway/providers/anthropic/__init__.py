"""Anthropic's Messages API: `adapter` (chat translated both ways, the native Messages API,
count_tokens), `wire` (the Messages format, both ways)."""

from gateway.config import ProviderConfig
from gateway.providers.anthropic.adapter import AnthropicProvider
from gateway.providers.capabilities import Offer
from gateway.providers.http import Upstream


def offer(provider_id: str, config: ProviderConfig, upstream: Upstream) -> Offer:
    adapter = AnthropicProvider(provider_id, config, upstream)
    return Offer(chat=adapter, messages=adapter, token_counting=adapter)
