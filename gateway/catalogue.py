"""The model catalogue: which models exist, who serves them, and what they cost.

Loaded once from JSON and validated strictly, it then answers cheaply: ``resolve`` is a
dict lookup to a record, provider entry and pre-parsed Decimal prices; ``listing`` and
``models_body`` produce the GET /v1/models payload from each record's listing entry (``listed``:
the record with OpenAI's ``object`` and ``owned_by`` beside the spec's fields), encoded once.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Literal

import msgspec

from ledger import charges
from ledger.events import Priced

SHIPPED_PATH = Path(__file__).with_name("catalogue.json")
MAX_DIMENSIONS = "max_dimensions"  # per_request_limits: an embedding model's vector length

Kind = Literal["chat", "embedding", "speech", "transcription", "music", "realtime", "completion"]
# Deprecation dates must carry a timezone so comparisons with "now" are unambiguous.
Timestamp = Annotated[datetime, msgspec.Meta(tz=True)]
NonEmptyStr = Annotated[str, msgspec.Meta(min_length=1)]


class UnknownModel(LookupError):
    """No catalogue entry matches the requested model name; the message names it."""


class CatalogueError(ValueError):
    """The catalogue file is malformed; the message names the model and the field."""


class Architecture(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    input_modalities: tuple[str, ...]
    output_modalities: tuple[str, ...]
    tokenizer: str


class TopProvider(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    is_moderated: bool


class ProviderPricing(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """One provider's prices for a model. The cache prices are optional: absent, the model's
    (`Pricing`) apply, so the same model is billed at each cloud's own cache rates where stated."""

    prompt: str
    completion: str
    image: str
    audio_music_per_generation: str
    input_cache_read: str | None = None
    input_cache_write: str | None = None


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


class Pricing(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Record-level list prices as decimal strings (USD per token unless named otherwise)."""

    prompt: str
    completion: str
    image: str
    request: str
    input_cache_read: str
    input_cache_write: str
    web_search: str
    internal_reasoning: str
    video_per_second: str
    audio_music_per_generation: str
    audio_per_minute: str = "0"  # ours: transcription models bill per minute of audio


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


class _FileRecord(ModelRecord, frozen=True, forbid_unknown_fields=True):
    """A record as a file may hold it: a saved GET /v1/models entry loads too, its
    listing-only fields ignored (`listed` sets them)."""

    object: str = "model"
    owned_by: str = ""


class Prices(msgspec.Struct, frozen=True):
    """Parsed prices for one (record, provider entry) pair, ready for billing."""

    prompt: Decimal
    completion: Decimal
    input_cache_read: Decimal
    input_cache_write: Decimal
    per_generation: Decimal
    audio_per_minute: Decimal
    per_token: Priced  # the token prices as a request records them (gateway.billing.pricing)


class Resolved(msgspec.Struct, frozen=True):
    """The outcome of ``Catalogue.resolve``: the record, the chosen upstream, its prices."""

    record: ModelRecord
    provider: ProviderEntry
    prices: Prices

    @property
    def model_id(self) -> str:
        """The canonical catalogue id (never an alias)."""
        return self.record.id

    @property
    def provider_id(self) -> str:
        return self.provider.provider_id

    @property
    def upstream_model(self) -> str:
        """The model name the upstream provider expects in its own API."""
        return self.provider.model_name

    @property
    def kind(self) -> Kind:
        return self.record.kind

    @property
    def max_dimensions(self) -> int | None:
        """An embedding model's vector length: the most `dimensions` a request may ask for."""
        limit = self.record.per_request_limits.get(MAX_DIMENSIONS)
        return None if limit is None else int(limit)


class _File(msgspec.Struct, frozen=True):
    data: tuple[msgspec.Raw, ...]


class _Ident(msgspec.Struct, frozen=True):
    id: str = ""


# Records are decoded one at a time from Raw so each error can name its model.
_FILE_DECODER = msgspec.json.Decoder(_File)
_IDENT_DECODER = msgspec.json.Decoder(_Ident)
_RECORD_DECODER = msgspec.json.Decoder(_FileRecord)
_ENCODER = msgspec.json.Encoder()


def _error(model: str, field: str, detail: str) -> CatalogueError:
    """Build the one error shape the loader raises: model, field, then what is wrong."""
    return CatalogueError(f"catalogue model {model!r}, field {field!r}: {detail}")


def _price(model: str, field: str, text: str) -> Decimal:
    """Parse a price string; it must be a finite, non-negative decimal."""
    try:
        value = Decimal(text)
    except InvalidOperation:
        raise _error(model, field, f"price {text!r} is not a decimal") from None
    if not value.is_finite() or value < 0:
        raise _error(model, field, f"price {text!r} must be finite and non-negative")
    return value


def _check_prices(record: ModelRecord) -> None:
    """Validate every price string in a record and its provider entries."""
    for field in Pricing.__struct_fields__:
        _price(record.id, f"pricing.{field}", getattr(record.pricing, field))
    for i, entry in enumerate(record.providers):
        for field in ProviderPricing.__struct_fields__:
            if (text := getattr(entry.pricing, field)) is not None:
                _price(record.id, f"providers[{i}].pricing.{field}", text)


def _decode_record(raw: msgspec.Raw, index: int) -> ModelRecord:
    """Decode and validate one record, naming it by id (or position) on failure."""
    try:
        label = _IDENT_DECODER.decode(raw).id or f"#{index}"
    except msgspec.ValidationError:
        label = f"#{index}"  # id has the wrong type; the full decode reports it
    try:
        record = _RECORD_DECODER.decode(raw)
    except msgspec.ValidationError as exc:
        # msgspec says e.g. "Object missing required field `context_length`"; keep it.
        raise CatalogueError(f"catalogue model {label!r}: {exc}") from None
    _check_prices(record)
    _check_whole_limit(record, MAX_DIMENSIONS)
    return record


def _check_whole_limit(record: ModelRecord, name: str) -> None:
    """A per-request limit the gateway enforces must be a positive whole number."""
    limit = record.per_request_limits.get(name)
    if limit is not None and not (limit.isascii() and limit.isdigit() and int(limit) > 0):
        raise _error(record.id, f"per_request_limits.{name}", f"{limit!r} is not a positive whole number")


def _resolved(record: ModelRecord, entry: ProviderEntry) -> Resolved:
    """The record served by `entry`, with that provider's prices parsed (its cache prices where
    it states them, else the model's)."""
    prompt = Decimal(entry.pricing.prompt)
    read = Decimal(_or(entry.pricing.input_cache_read, record.pricing.input_cache_read))
    write = Decimal(_or(entry.pricing.input_cache_write, record.pricing.input_cache_write))
    prices = Prices(
        prompt=prompt,
        completion=Decimal(entry.pricing.completion),
        input_cache_read=read,
        input_cache_write=write,
        per_generation=Decimal(entry.pricing.audio_music_per_generation),
        audio_per_minute=Decimal(record.pricing.audio_per_minute),
        per_token=charges.per_token(prompt, Decimal(entry.pricing.completion), read or None, write or None),
    )
    return Resolved(record=record, provider=entry, prices=prices)


def _or(stated: str | None, fallback: str) -> str:
    return fallback if stated is None else stated


def _resolutions(record: ModelRecord) -> list[tuple[str, tuple[Resolved, ...]]]:
    """All lookup keys for a record: a bare id or alias names every provider entry (in the file's
    order, its priority); "provider/name" names that provider's entries (pinned; a cloud may
    serve a model under several ids, such as Bedrock's inference profiles)."""
    names = (record.id, *record.aliases)
    served = tuple(_resolved(record, entry) for entry in record.providers)
    pairs = [(name, served) for name in names]
    for provider_id in dict.fromkeys(resolved.provider_id for resolved in served):
        own = tuple(resolved for resolved in served if resolved.provider_id == provider_id)
        pairs.extend((f"{provider_id}/{name}", own) for name in names)
    return pairs


def _upstream_names(record: ModelRecord, served: tuple[Resolved, ...]) -> list[tuple[str, tuple[Resolved, ...]]]:
    """"provider/upstream id" for each entry: one inference profile or deployment exactly."""
    return [(f"{resolved.provider_id}/{resolved.upstream_model}", (resolved,)) for resolved in served]


def _build_index(records: tuple[ModelRecord, ...]) -> Mapping[str, tuple[Resolved, ...]]:
    """Key every resolvable name; a name claimed twice is a catalogue error. The upstream ids come
    last and only where no name claims them (an operator's file may list one upstream twice)."""
    index: dict[str, tuple[Resolved, ...]] = {}
    for record in records:
        for key, served in _resolutions(record):
            holder = index.get(key)
            if holder is not None and holder[0].record is not record:
                raise _error(record.id, "aliases", f"name {key!r} already belongs to {holder[0].model_id!r}")
            index.setdefault(key, served)
    for record in records:
        for key, served in _upstream_names(record, index[record.id]):
            index.setdefault(key, served)
    return MappingProxyType(index)


def listed(record: ModelRecord) -> dict:
    """A record as GET /v1/models lists it: every spec field, and OpenAI's `object` and
    `owned_by` (the model's family) that its SDK's Model type reads."""
    return {"id": record.id, **msgspec.to_builtins(record), "object": "model", "owned_by": record.family}


def _utc(moment: datetime | None) -> datetime:
    """``now`` defaults to the current time; a naive datetime is taken as UTC."""
    match moment:
        case None:
            return datetime.now(UTC)
        case datetime(tzinfo=None):
            return moment.replace(tzinfo=UTC)
        case _:
            return moment


class Catalogue:
    """An immutable, validated set of model records with a prebuilt name index."""

    __slots__ = ("_entries", "_index", "_records")

    def __init__(self, records: tuple[ModelRecord, ...]) -> None:
        """Index ``records`` (already validated); raises CatalogueError on name clashes."""
        self._records = records
        self._index = _build_index(records)
        self._entries = MappingProxyType({record.id: _ENCODER.encode(listed(record)) for record in records})

    @classmethod
    def load(cls, path: str | Path | None = None) -> Catalogue:
        """Read and validate a catalogue file (``None``: the shipped one).

        Raises CatalogueError for malformed content; OSError if the file cannot be read.
        """
        content = Path(SHIPPED_PATH if path is None else path).read_bytes()
        try:
            raws = _FILE_DECODER.decode(content).data
        except msgspec.DecodeError as exc:
            raise CatalogueError(f"catalogue file {str(path or SHIPPED_PATH)!r}: {exc}") from None
        return cls(tuple(_decode_record(raw, i) for i, raw in enumerate(raws)))

    def resolve(self, model: str) -> Resolved:
        """Map an id, alias, "provider/id" or "provider/alias" to a Resolved: a bare name's
        first (preferred) provider entry. Raises UnknownModel, including for a provider prefix
        whose provider does not serve the model."""
        return self.candidates(model)[0]

    def candidates(self, model: str) -> tuple[Resolved, ...]:
        """Every provider entry `model` may be served by, in the file's order: all of the
        record's for a bare name, the one named for "provider/name". Raises UnknownModel."""
        try:
            return self._index[model]
        except KeyError:
            raise UnknownModel(f"unknown model {model!r}") from None

    def check_providers(self, configured: Collection[str]) -> None:
        """CatalogueError naming the first model whose provider is not configured."""
        for record in self._records:
            for entry in record.providers:
                if entry.provider_id not in configured:
                    raise _error(record.id, "providers", f"provider {entry.provider_id!r} is not configured"
                                 f" (configured: {', '.join(sorted(configured))}); add [providers.{entry.provider_id}]")

    def listing(self, *, include_deactivated: bool = False, exclude_deprecated: bool = False,
                now: datetime | None = None) -> list[ModelRecord]:
        """Records in file order; a date at or before ``now`` counts as having happened."""
        moment = _utc(now)

        def passed(when: datetime | None) -> bool:
            return when is not None and when <= moment

        return [
            record
            for record in self._records
            if (include_deactivated or not passed(record.deactivated_at))
            and not (exclude_deprecated and passed(record.deprecated_at))
        ]

    def models_body(self, *, include_deactivated: bool = False, exclude_deprecated: bool = False,
                    now: datetime | None = None) -> bytes:
        """The encoded GET /v1/models body ``{"object": "list", "data": [...]}`` for the same
        filters as ``listing``, joined from the entries encoded at load."""
        records = self.listing(include_deactivated=include_deactivated,
                               exclude_deprecated=exclude_deprecated, now=now)
        return b'{"object":"list","data":[' + b",".join(self.entry(r) for r in records) + b"]}"

    def entry(self, record: ModelRecord) -> bytes:
        """The encoded listing entry of `record` (see `listed`)."""
        return self._entries[record.id]

    def names(self, kind: Kind) -> list[str]:
        """Every name that resolves to a model of `kind` (ids, aliases, provider-prefixed forms)."""
        return [name for name, served in self._index.items() if served[0].kind == kind]
