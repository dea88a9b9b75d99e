"""The model catalogue: which models exist, who serves them, and what they cost.

Loaded from JSON and validated strictly, it then answers cheaply: ``resolve`` is a dict lookup
to a record, provider entry and pre-parsed Decimal prices; ``listing`` and ``models_body``
produce the GET /v1/models payload from each record's listing entry (``listed``: the record
with OpenAI's ``object`` and ``owned_by`` beside the spec's fields), encoded once. One
`Catalogue` holds the prices in force at one instant, one price version (gateway.catalogue.versions);
`at` gives the same records priced at another.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType

import msgspec

from gateway.catalogue import loading
from gateway.catalogue.pricing import error, in_force
from gateway.catalogue.prices import Prices, prices_at, versioned
from gateway.catalogue.records import MAX_DIMENSIONS, Kind, ModelRecord, ProviderEntry
from ledger.price_check import version_of

SHIPPED_PATH = Path(__file__).with_name("catalogue.json")
EPOCH = "1970-01-01T00:00:00Z"
_ENCODER = msgspec.json.Encoder()


def read(path: str | Path | None = None) -> bytes:
    """A catalogue file's bytes (``None``: the shipped one); OSError if it cannot be read."""
    return Path(SHIPPED_PATH if path is None else path).read_bytes()


class UnknownModel(LookupError):
    """No catalogue entry matches the requested model name; the message names it."""


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


def _priced(found: tuple[ModelRecord, ...], at: datetime) -> tuple[str, list[list[Prices]]]:
    """Every entry's prices in force at `at`, and the price version they make (the hash of what
    they publish, gateway.catalogue.versions)."""
    unversioned = [[prices_at(r.id, r.pricing, e.pricing, at) for e in r.providers] for r in found]
    version = version_of(published(found, unversioned))
    return version, [[versioned(p, version) for p in row] for row in unversioned]


def _undated(pricing: msgspec.Struct) -> dict:
    stated = msgspec.to_builtins(pricing)
    for name in ("effective_to", "price_history"):
        stated.pop(name, None)
    return {**stated, "effective_from": stated.get("effective_from") or EPOCH}


def published(found: tuple[ModelRecord, ...], prices: list[list[Prices]]) -> list[dict]:
    """The prices of every model and provider entry, as GET /v1/prices/{version} lists them."""
    return [{"id": record.id, "providers": [
        {"providerId": entry.provider_id, "modelName": entry.model_name, "pricing": p.published(entry.pricing.image)}
        for entry, p in zip(record.providers, row, strict=True)]} for record, row in zip(found, prices, strict=True)]


def _resolutions(record: ModelRecord, prices: list[Prices]) -> list[tuple[str, tuple[Resolved, ...]]]:
    """All lookup keys for a record: a bare id or alias names every provider entry (in the file's
    order, its priority); "provider/name" names that provider's entries (pinned; a cloud may
    serve a model under several ids, such as Bedrock's inference profiles)."""
    names = (record.id, *record.aliases)
    served = tuple(Resolved(record, entry, p) for entry, p in zip(record.providers, prices, strict=True))
    pairs = [(name, served) for name in names]
    for provider_id in dict.fromkeys(resolved.provider_id for resolved in served):
        own = tuple(resolved for resolved in served if resolved.provider_id == provider_id)
        pairs.extend((f"{provider_id}/{name}", own) for name in names)
    return pairs


def _upstream_names(record: ModelRecord, served: tuple[Resolved, ...]) -> list[tuple[str, tuple[Resolved, ...]]]:
    """"provider/upstream id" for each entry: one inference profile or deployment exactly."""
    return [(f"{resolved.provider_id}/{resolved.upstream_model}", (resolved,)) for resolved in served]


def _build_index(records: tuple[ModelRecord, ...], prices: list[list[Prices]]) -> Mapping[str, tuple[Resolved, ...]]:
    """Key every resolvable name; a name claimed twice is a catalogue error. The upstream ids come
    last and only where no name claims them (an operator's file may list one upstream twice)."""
    index: dict[str, tuple[Resolved, ...]] = {}
    for record, row in zip(records, prices, strict=True):
        for key, served in _resolutions(record, row):
            holder = index.get(key)
            if holder is not None and holder[0].record is not record:
                raise error(record.id, "aliases", f"name {key!r} already belongs to {holder[0].model_id!r}")
            index.setdefault(key, served)
    for record in records:
        for key, served in _upstream_names(record, index[record.id]):
            index.setdefault(key, served)
    return MappingProxyType(index)


def listed(record: ModelRecord) -> dict:
    """A record as GET /v1/models lists it: every spec field, and OpenAI's `object` and
    `owned_by` (the model's family) that its SDK's Model type reads. Its prices list what they
    state (a tier is listed where there is one) and always the per-minute audio price."""
    body = msgspec.to_builtins(record)
    body["pricing"] = {**body["pricing"], "audio_per_minute": record.pricing.audio_per_minute}
    return {"id": record.id, **body, "object": "model", "owned_by": record.family}


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
    """An immutable, validated set of model records with a prebuilt name index, priced as at one
    instant: its prices are one price version (`version`)."""

    __slots__ = ("_entries", "_index", "_published", "_records", "at", "version")

    def __init__(self, records: tuple[ModelRecord, ...], at: datetime | None = None,
                 entries: Mapping[str, bytes] | None = None) -> None:
        """Index ``records`` (already validated) with the prices in force at `at` (default: now);
        raises CatalogueError on name clashes or an entry without a price then."""
        self._records, self.at = records, _utc(at)
        self.version, prices = _priced(records, self.at)
        self._published = published(records, prices)
        self._index = _build_index(records, prices)
        self._entries = entries or MappingProxyType({r.id: _ENCODER.encode(listed(r)) for r in records})

    @classmethod
    def load(cls, path: str | Path | None = None, at: datetime | None = None) -> Catalogue:
        """Read and validate a catalogue file (``None``: the shipped one), priced as at `at`.

        Raises CatalogueError for malformed content; OSError if the file cannot be read.
        """
        return cls.parse(read(path), str(path or SHIPPED_PATH), at)

    @classmethod
    def parse(cls, content: bytes, label: str, at: datetime | None = None) -> Catalogue:
        """A catalogue file's `content` (`label` names it in errors), priced as at `at`."""
        return cls(loading.records(content, label), at)

    def priced_at(self, at: datetime) -> Catalogue:
        """The same records with the prices in force at `at`."""
        return Catalogue(self._records, at, self._entries)

    def changes(self) -> list[datetime]:
        """Every instant at which one of its prices changes (`effective_from`, `effective_to`)."""
        return loading.instants(self._records)

    def stated_pricing(self, model_id: str, provider_id: str, model_name: str, at: datetime) -> dict | None:
        """A provider entry's prices in force at `at`, as the file states them, with the instant
        they took effect (the epoch when none is stated); None when no such entry is priced then."""
        for record in self._records:
            for entry in record.providers if record.id == model_id else ():
                if (entry.provider_id, entry.model_name) == (provider_id, model_name):
                    stated = in_force(entry.pricing, at)
                    return None if stated is None else _undated(stated)
        return None

    def prices(self) -> list[dict]:
        """Its prices, as GET /v1/prices/{version} lists them (`data`)."""
        return self._published

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
                    raise error(record.id, "providers", f"provider {entry.provider_id!r} is not configured"
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
        """The encoded GET /v1/models body ``{"object": "list", "price_version", "data": [...]}`` for the same
        filters as ``listing``, joined from the entries encoded at load."""
        records = self.listing(include_deactivated=include_deactivated,
                               exclude_deprecated=exclude_deprecated, now=now)
        return (b'{"object":"list","price_version":"' + self.version.encode() + b'","data":['
                + b",".join(self.entry(r) for r in records) + b"]}")

    def entry(self, record: ModelRecord) -> bytes:
        """The encoded listing entry of `record` (see `listed`)."""
        return self._entries[record.id]

    def names(self, kind: Kind) -> list[str]:
        """Every name that resolves to a model of `kind` (ids, aliases, provider-prefixed forms)."""
        return [name for name, served in self._index.items() if served[0].kind == kind]
