"""OpenAI's wire, and every OpenAI-compatible host (Groq, OpenRouter, ...): `adapter` (chat, text
completions, embeddings, speech, transcription, realtime), `responses` (the Responses API),
`float32` (embedding vectors as base64), `multipart` (a form sent on as it arrives)."""

from gateway.config import ProviderConfig
from gateway.providers.capabilities import Offer
from gateway.providers.http import Upstream
from gateway.providers.openai.adapter import OpenAIProvider
from gateway.providers.openai.responses import OpenAIResponses


def offer(provider_id: str, config: ProviderConfig, upstream: Upstream) -> Offer:
    adapter = OpenAIProvider(provider_id, config, upstream)
    return Offer(chat=adapter, responses=OpenAIResponses(adapter), completion=adapter, embedding=adapter,
                 speech=adapter, transcription=adapter, realtime=adapter)
