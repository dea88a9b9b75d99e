"""The Gemini API: `adapter` (chat and the music models), `chat_request` (an OpenAI chat body as
a generateContent request), `chat` (generateContent answers and stream events as OpenAI's)."""

from gateway.config import ProviderConfig
from gateway.providers.capabilities import Offer
from gateway.providers.google.adapter import GoogleProvider
from gateway.providers.http import Upstream


def offer(provider_id: str, config: ProviderConfig, upstream: Upstream) -> Offer:
    adapter = GoogleProvider(provider_id, config, upstream)
    return Offer(chat=adapter, music=adapter)
