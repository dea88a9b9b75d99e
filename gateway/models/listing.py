"""GET /v1/models and GET /v1/models/{id}: the catalogue in the shape its caller's SDK reads.

Every caller gets the spec's model record with OpenAI's `object` and `owned_by` beside it (the
catalogue's listing entry, encoded once at load). A caller that sends `anthropic-version` (the
anthropic SDK) gets Anthropic's fields beside those too: `type`, `display_name`, `created_at`,
`lifecycle`, `retires_at`, `max_input_tokens`, `max_tokens`; and its list is paged the way
Anthropic pages it (`limit`, default 20; `after_id`, `before_id`; `has_more`, `first_id`, `last_id`).
A model is found by id, alias or `provider/model`, as requests name it; anything else is a 404.
"""

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from gateway.catalogue import Catalogue, ModelRecord, UnknownModel, listed
from gateway.edge.parsing import WholeNumber
from gateway.edge.errors import ApiError, bad_request
from gateway.jsonio import encode

ANTHROPIC_VERSION = "anthropic-version"
PAGE = WholeNumber("limit", 1, 1000, 20, "models per page, for Anthropic's client (it sends anthropic-version)")
TRUE_WORDS = frozenset({"1", "true", "yes", "on"})


def flag(query: Mapping[str, str], name: str) -> bool:
    return query.get(name, "").lower() in TRUE_WORDS


def anthropic_client(headers: Mapping[str, str]) -> bool:
    """Whether the caller is Anthropic's client: it sends its API version on every request."""
    return ANTHROPIC_VERSION in headers


def anthropic_entry(record: ModelRecord, now: datetime) -> dict:
    """`record`'s listing entry with the fields the anthropic SDK's ModelInfo reads."""
    return {**listed(record), "type": "model", "display_name": record.name,
            "created_at": datetime.fromtimestamp(record.created, UTC), "lifecycle": lifecycle(record, now),
            "retires_at": record.deactivated_at, "max_input_tokens": record.context_length or None,
            "max_tokens": record.limit("max_completion_tokens")}


def lifecycle(record: ModelRecord, now: datetime) -> str:
    """Anthropic's lifecycle stage: retired once deactivated, deprecated once deprecated."""
    if record.deactivated_at is not None and record.deactivated_at <= now:
        return "retired"
    if record.deprecated_at is not None and record.deprecated_at <= now:
        return "deprecated"
    return "active"


def list_body(catalogue: Catalogue, query: Mapping[str, str], headers: Mapping[str, str]) -> bytes:
    """The GET /v1/models body for this caller (the filters of spec 4.5 in every shape)."""
    deactivated, deprecated = flag(query, "include_deactivated"), flag(query, "exclude_deprecated")
    if not anthropic_client(headers):
        return catalogue.models_body(include_deactivated=deactivated, exclude_deprecated=deprecated)
    now = datetime.now(UTC)
    records = catalogue.listing(include_deactivated=deactivated, exclude_deprecated=deprecated, now=now)
    shown = page(records, query)
    entries = [anthropic_entry(record, now) for record in shown]
    return encode({"object": "list", "price_version": catalogue.version, "data": entries,
                   "has_more": _more(records, shown, query),
                   "first_id": entries[0]["id"] if entries else None,
                   "last_id": entries[-1]["id"] if entries else None})


def _more(records: Sequence[ModelRecord], shown: Sequence[ModelRecord], query: Mapping[str, str]) -> bool:
    """Whether models lie beyond the page in the direction it was paged (before_id: earlier)."""
    if not shown:
        return False
    return shown[0] is not records[0] if query.get("before_id") else shown[-1] is not records[-1]


def page(records: list[ModelRecord], query: Mapping[str, str]) -> list[ModelRecord]:
    """The page `limit`, `after_id` and `before_id` select (a cursor that is not listed: 400)."""
    limit = PAGE.read(query)
    ids = [record.id for record in records]
    if after := query.get("after_id"):
        return records[_position(ids, after, "after_id") + 1:][:limit]
    if before := query.get("before_id"):
        return records[:_position(ids, before, "before_id")][-limit:]
    return records[:limit]


def _position(ids: list[str], cursor: str, name: str) -> int:
    try:
        return ids.index(cursor)
    except ValueError:
        raise bad_request(f"{name} {cursor!r} is not a listed model id", name) from None


def model_body(catalogue: Catalogue, name: str, headers: Mapping[str, str]) -> bytes:
    """One model's entry, found as a request would name it; 404 naming it otherwise."""
    try:
        record = catalogue.resolve(name).record
    except UnknownModel:
        raise ApiError(404, f"model {name!r} does not exist; GET /v1/models lists the models",
                       type="not_found", param="model") from None
    if anthropic_client(headers):
        return encode(anthropic_entry(record, datetime.now(UTC)))
    return catalogue.entry(record)
