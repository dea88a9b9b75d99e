"""Provider adapters, one module per wire protocol."""

from gateway.config import ProvidersConfig
from gateway.providers.anthropic import AnthropicProvider
from gateway.providers.base import Provider
from gateway.providers.google import GoogleProvider
from gateway.providers.http import Upstream
from gateway.providers.openai import OpenAIProvider


def build(config: ProvidersConfig, upstream: Upstream) -> dict[str, Provider]:
    """Every adapter this gateway can call, by provider id, sharing one client session."""
    return {"openai": OpenAIProvider(config.openai, upstream),
            "anthropic": AnthropicProvider(config.anthropic, upstream),
            "google": GoogleProvider(config.google, upstream)}
