"""Provider adapters, one module per wire protocol, and what they share.

- `openai` (with `openai_responses`: the Responses API; `float32`: embedding vectors;
  `multipart`: a form sent on as it arrives), `anthropic` (`anthropic_wire`: the Messages format,
  both ways), `google` (`google_chat_request` out, `google_chat` back: Gemini's generateContent).
- `base`: the calls, replies and streams between the gateway and an adapter; `capabilities`: which
  adapter can do what (Providers); `shapes`: the shapes answers are checked against; `usage`: what
  an upstream reports it used (Usage) and the checks a report passes.
- `http`: the pooled client session and an upstream's errors; `stream`: an upstream's server-sent
  events read one by one, its failures mapped in one place (UpstreamEventStream).
"""

from collections.abc import Mapping
from typing import TypeVar

from gateway.config import ProviderConfig
from gateway.providers.anthropic import AnthropicProvider
from gateway.providers.capabilities import ChatProvider, Providers
from gateway.providers.google import GoogleProvider
from gateway.providers.http import Upstream
from gateway.providers.openai import OpenAIProvider
from gateway.providers.openai_responses import OpenAIResponses

A = TypeVar("A", OpenAIProvider, AnthropicProvider, GoogleProvider)


def build(configs: Mapping[str, ProviderConfig], upstream: Upstream) -> Providers:
    """An adapter for every configured provider, by the protocol it speaks, sharing one client
    session, listed under each capability its protocol has (the one statement of what each can do)."""
    openai = [OpenAIProvider(i, c, upstream) for i, c in configs.items() if c.protocol == "openai"]
    anthropic = [AnthropicProvider(i, c, upstream) for i, c in configs.items() if c.protocol == "anthropic"]
    google = [GoogleProvider(i, c, upstream) for i, c in configs.items() if c.protocol == "google"]
    chat: dict[str, ChatProvider] = {**_by_id(openai), **_by_id(anthropic), **_by_id(google)}
    return Providers(chat=chat, messages=_by_id(anthropic),
                     responses={p.id: OpenAIResponses(p) for p in openai},
                     completion=_by_id(openai), token_counting=_by_id(anthropic),
                     embedding=_by_id(openai), speech=_by_id(openai), transcription=_by_id(openai),
                     realtime=_by_id(openai), music=_by_id(google))


def _by_id(adapters: list[A]) -> dict[str, A]:
    return {adapter.id: adapter for adapter in adapters}
