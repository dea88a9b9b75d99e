"""A catalogue record as the file holds it and GET /v1/models lists it (its prices: pricing)."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from gateway.catalogue.pricing import Pricing, ProviderPricing, Timestamp

MAX_DIMENSIONS = "max_dimensions"  # per_request_limits: an embedding model's vector length

Kind = Literal["chat", "embedding", "speech", "transcription", "music", "realtime", "completion"]
NonEmptyStr = Annotated[str, msgspec.Meta(min_length=1)]


class Architecture(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    input_modalities: tuple[str, ...]
    output_modalities: tuple[str, ...]
    tokenizer: str


class TopProvider(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    is_moderated: bool


class ProviderEntry(msgspec.Struct, frozen=True, forbid_unknown_fields=True, rename="camel"):
    """One upstream that serves a model; ``rename`` puts providerId etc. on the wire."""

    provider_id: NonEmptyStr
    model_name: NonEmptyStr
    pricing: ProviderPricing
    streaming: bool
    vision: bool
    documents: bool
    cancellation: bool
    tools: bool
    parallel_tool_calls: bool
    reasoning: bool
    stability: str


class ModelRecord(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One model as listed by GET /v1/models; every field is required in the file."""

    id: NonEmptyStr
    name: str
    aliases: tuple[str, ...]
    created: int
    description: str
    family: str
    kind: Kind
    architecture: Architecture
    top_provider: TopProvider
    providers: Annotated[tuple[ProviderEntry, ...], msgspec.Meta(min_length=1)]
    pricing: Pricing
    context_length: Annotated[int, msgspec.Meta(ge=0)]  # 0: not token-based (audio, music)
    per_request_limits: dict[str, str]
    supported_parameters: tuple[str, ...]
    json_output: bool
    structured_outputs: bool
    free: bool
    deprecated_at: Timestamp | None
    deactivated_at: Timestamp | None
    stability: str

    def limit(self, name: str) -> int | None:
        """A per-request limit as a number, when the catalogue states one in ASCII digits ("²" is a
        digit to str.isdigit, and int() would read it)."""
        text = self.per_request_limits.get(name, "")
        return int(text) if text.isascii() and text.isdigit() and len(text) <= 18 else None


class FileRecord(ModelRecord, frozen=True, forbid_unknown_fields=True):
    """A record as a file may hold it: a saved GET /v1/models entry loads too, its
    listing-only fields ignored (`listed` sets them)."""

    object: str = "model"
    owned_by: str = ""
