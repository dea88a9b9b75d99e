"""Provider adapters, one module per wire protocol."""

import aiohttp

from gateway.config import ProvidersConfig
from gateway.providers.anthropic import AnthropicProvider
from gateway.providers.base import Provider
from gateway.providers.google import GoogleProvider
from gateway.providers.openai import OpenAIProvider


def build(config: ProvidersConfig, session: aiohttp.ClientSession) -> dict[str, Provider]:
    """Every adapter this gateway can call, by provider id, sharing one client session."""
    return {"openai": OpenAIProvider(config.openai, session),
            "anthropic": AnthropicProvider(config.anthropic, session),
            "google": GoogleProvider(config.google, session)}
