"""Provider adapters, one module per wire protocol."""

from gateway.config import ProvidersConfig
from gateway.providers.anthropic import AnthropicProvider
from gateway.providers.capabilities import Providers
from gateway.providers.google import GoogleProvider
from gateway.providers.http import Upstream
from gateway.providers.openai import OpenAIProvider
from gateway.providers.openai_responses import OpenAIResponses


def build(config: ProvidersConfig, upstream: Upstream) -> Providers:
    """Every adapter this gateway can call, sharing one client session, listed under each
    capability it has (the one statement of what each can do)."""
    openai = OpenAIProvider(config.openai, upstream)
    anthropic = AnthropicProvider(config.anthropic, upstream)
    google = GoogleProvider(config.google, upstream)
    return Providers(chat={p.id: p for p in (openai, anthropic, google)}, messages={anthropic.id: anthropic},
                     responses={openai.id: OpenAIResponses(openai)},
                     completion={openai.id: openai}, token_counting={anthropic.id: anthropic},
                     embedding={openai.id: openai}, speech={openai.id: openai},
                     transcription={openai.id: openai}, realtime={openai.id: openai},
                     music={google.id: google})
