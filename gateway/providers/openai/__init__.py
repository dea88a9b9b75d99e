"""OpenAI's wire, and every OpenAI-compatible host (Groq, OpenRouter, ...): `adapter` (chat, text
completions, embeddings, speech, transcription, realtime), `responses` (the Responses API),
`batches` (the Batch API: Files + Batches), `jsonl` (a batch API's HTTP: GETs, JSON Lines read
line by line, bodies sent as produced; the anthropic protocol's batches use it too), `float32`
(embedding vectors as base64), `multipart` (a form sent on as it arrives)."""

from gateway.config import ProviderConfig, batch_api
from gateway.providers.capabilities import Offer
from gateway.providers.http import Upstream
from gateway.providers.openai.adapter import OpenAIProvider
from gateway.providers.openai.batches import OpenAIBatches
from gateway.providers.openai.responses import OpenAIResponses


def offer(provider_id: str, config: ProviderConfig, upstream: Upstream) -> Offer:
    adapter = OpenAIProvider(provider_id, config, upstream)
    batches = OpenAIBatches(adapter, config, upstream) if batch_api(provider_id, config) else None
    return Offer(chat=adapter, responses=OpenAIResponses(adapter), completion=adapter, embedding=adapter,
                 speech=adapter, transcription=adapter, realtime=adapter, batch=batches)
