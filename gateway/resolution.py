"""Which model and which adapter serve a request, for every route: the catalogue entry (400 for
an unknown model), its kind (400 naming the route that serves it), and an adapter of its provider
with the capability the route needs (501 when this gateway has none yet). A model of another
kind is sent to its kind's route, as the route table declares it (Services.kind_routes)."""

from collections.abc import Callable, Mapping
from typing import Generic, TypeVar

import msgspec

from gateway.catalogue import Kind, Resolved, UnknownModel
from gateway.edge.errors import ApiError, bad_request
from gateway.providers.capabilities import (
    ChatProvider, CompletionProvider, EmbeddingProvider, MusicProvider, Providers, RealtimeProvider, SpeechProvider,
    TranscriptionProvider,
)
from gateway.services import Services

P = TypeVar("P")
ALL_MODELS = "GET /v1/models lists the models"


class Capability(Generic[P]):
    """What a route needs: models of `kind`, served by an adapter of the `adapters` registry."""

    def __init__(self, kind: Kind, adapters: Callable[[Providers], Mapping[str, P]],
                 unknown_hint: str = ALL_MODELS) -> None:
        self.kind, self.adapters, self.unknown_hint = kind, adapters, unknown_hint


CHAT: Capability[ChatProvider] = Capability("chat", lambda providers: providers.chat)
COMPLETION: Capability[CompletionProvider] = Capability("completion", lambda providers: providers.completion)
EMBEDDING: Capability[EmbeddingProvider] = Capability("embedding", lambda providers: providers.embedding)
SPEECH: Capability[SpeechProvider] = Capability("speech", lambda providers: providers.speech)
TRANSCRIPTION: Capability[TranscriptionProvider] = Capability(
    "transcription", lambda providers: providers.transcription)
REALTIME: Capability[RealtimeProvider] = Capability("realtime", lambda providers: providers.realtime)
MUSIC: Capability[MusicProvider] = Capability("music", lambda providers: providers.music,
                                               "music models are tune-3-clip-preview and tune-3-pro-preview")


class Served(msgspec.Struct, Generic[P], frozen=True):
    """A request's model and the adapter that serves it, typed by the capability checked."""

    model: Resolved
    provider: P


def resolve(services: Services, model: str, capability: Capability[P]) -> Served[P]:
    """The catalogue entry of `model` and its first provider's adapter (see `servers`), for the
    routes that never fail over."""
    return servers(services, model, capability)[0]


def servers(services: Services, model: str, capability: Capability[P]) -> list[Served[P]]:
    """Every provider of `model` with an adapter that has the capability, in the catalogue's
    order; 400 naming `model` when it is unknown or of another kind, 501 when none can serve it."""
    candidates = _models_of_kind(services, model, capability)
    adapters = capability.adapters(services.providers)
    served = [Served(resolved, adapters[resolved.provider_id]) for resolved in candidates
              if resolved.provider_id in adapters]
    if not served:
        provider = candidates[0].provider_id
        raise ApiError(501, f"provider {provider!r} of model {model!r} cannot serve {capability.kind} requests in"
                            f" this gateway yet, or has no credentials or resource configured ([providers.{provider}])",
                       type="not_implemented")
    return served


def _models_of_kind(services: Services, model: str, capability: Capability) -> tuple[Resolved, ...]:
    """The catalogue entries of `model`; 400 naming `model` unless it is of the capability's kind."""
    try:
        candidates = services.catalogue.candidates(model)
    except UnknownModel:
        raise bad_request(f"unknown model {model!r}; {capability.unknown_hint}", "model") from None
    if (kind := candidates[0].kind) != capability.kind:
        raise bad_request(f"model {model!r} is a {kind} model, not a {capability.kind} model;"
                          f" use {services.kind_routes[kind]}", "model")
    return candidates
