"""Reading a catalogue file: each record decoded on its own (so an error names its model) and
validated, prices and dates included, before anything is built from it."""

from __future__ import annotations

from datetime import datetime

import msgspec

from gateway.catalogue import pricing
from gateway.catalogue.pricing import CatalogueError, error
from gateway.catalogue.records import MAX_DIMENSIONS, FileRecord, ModelRecord


class _File(msgspec.Struct, frozen=True):
    data: tuple[msgspec.Raw, ...]


class _Ident(msgspec.Struct, frozen=True):
    id: str = ""


# Records are decoded one at a time from Raw so each error can name its model.
_FILE_DECODER = msgspec.json.Decoder(_File)
_IDENT_DECODER = msgspec.json.Decoder(_Ident)
_RECORD_DECODER = msgspec.json.Decoder(FileRecord)


def records(content: bytes, label: str) -> tuple[ModelRecord, ...]:
    """Every record of a catalogue file's `content`, validated; CatalogueError naming what is wrong
    (`label` names the file)."""
    try:
        raws = _FILE_DECODER.decode(content).data
    except msgspec.DecodeError as exc:
        raise CatalogueError(f"catalogue file {label!r}: {exc}") from None
    return tuple(_decode_record(raw, i) for i, raw in enumerate(raws))


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
    pricing.check(record.id, "pricing", record.pricing)
    for i, entry in enumerate(record.providers):
        pricing.check(record.id, f"providers[{i}].pricing", entry.pricing)
    _check_whole_limit(record, MAX_DIMENSIONS)
    return record


def _check_whole_limit(record: ModelRecord, name: str) -> None:
    """A per-request limit the gateway enforces must be a positive whole number."""
    limit = record.per_request_limits.get(name)
    if limit is not None and not (limit.isascii() and limit.isdigit() and int(limit) > 0):
        raise error(record.id, f"per_request_limits.{name}", f"{limit!r} is not a positive whole number")


def instants(found: tuple[ModelRecord, ...]) -> list[datetime]:
    """Every instant at which some price of the catalogue changes, in order."""
    changes = {when for record in found for stated in (record.pricing, *(e.pricing for e in record.providers))
               for when in pricing.instants(stated)}
    return sorted(changes)
