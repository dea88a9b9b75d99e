"""The read API of what an organization did: its request log, its music tracks and the text
kept beside them, as typed rows (see ledger.queries for the rest).

Log pages are keyed by position, never by offset: each filter (ledger.schema.LOG_FILTERS) has
an index on (org_id, <filter>, position), so any page is one index range read however deep.
"""

from collections.abc import Sequence
from typing import NamedTuple

from ledger.events import Attempt, RequestCompleted
from ledger.recorder import Recorder
from ledger.schema import LOG_FILTERS


class LogRow(NamedTuple):
    """One request as the request log keeps it."""
    request_id: str
    position: int
    created_at_us: int
    route: str
    model: str
    provider: str
    status: int
    stream: int
    key_id: str
    prompt_tokens: int
    completion_tokens: int
    cost_usd_nano: int
    cost_inr_nano: int
    charged_inr_nano: int
    usd_to_inr: str
    latency_ms: int
    error: str
    content_id: str
    anomaly: str  # why it cost more than it held, if it did (RequestCompleted.anomaly)
    price_version: str  # the catalogue prices it was charged at (GET /v1/prices/{version}), and their tier
    price_tier: str
    batch_id: str  # a line of a batch: the batch and the line's custom_id ("" otherwise)
    custom_id: str


class TrackRow(NamedTuple):
    """A music track with its request's charge and its kept texts (None: not kept)."""
    request_id: str
    org_id: str
    position: int
    created_at_us: int
    model: str
    provider: str
    storage: str
    error: int
    object_key: str
    expired_at_us: int | None
    charged_inr_nano: int
    cost_usd_nano: int
    usd_to_inr: str
    prompt: bytes | None
    prompt_removed_at_us: int | None
    text: bytes | None


class Text(NamedTuple):
    """A content row: its body (None once removed) and when it was removed (None: kept)."""
    body: bytes | None
    removed_at_us: int | None


SELECT_LOG = f"SELECT {', '.join(LogRow._fields)} FROM request_log"
TRACK_COLUMNS = ("m.request_id, m.org_id, r.position, m.created_at_us, m.model, m.provider, m.storage,"
                 " m.error, m.object_key, m.expired_at_us, r.charged_inr_nano, r.cost_usd_nano,"
                 " r.usd_to_inr, p.body, p.removed_at_us, t.body")
TRACKS = ("SELECT " + TRACK_COLUMNS + " FROM music_tracks m JOIN request_log r ON r.request_id = m.request_id"
          " LEFT JOIN content p ON p.content_id = m.prompt_content_id AND m.prompt_content_id != ''"
          " LEFT JOIN content t ON t.content_id = m.text_content_id AND m.text_content_id != ''")


def _bytes(value: bytes | memoryview | None) -> bytes | None:
    return None if value is None else bytes(value)


def _track(row: tuple) -> TrackRow:
    # The three content columns last: bodies as bytes whatever the driver returns.
    return TrackRow._make((*row[:13], _bytes(row[13]), row[14], _bytes(row[15])))


def log_page_sql(org_id: str, filters: Sequence[tuple[str, str | int]], before: int | None,
                 limit: int) -> tuple[str, tuple]:
    """The statement of `log_page` (qmark form), for a look at its plan."""
    where, params = ["org_id = ?"], list[str | int]([org_id])
    for name, value in filters:
        if name not in LOG_FILTERS:
            raise ValueError(f"the request log cannot be filtered by {name!r}")
        where.append(f"{name} = ?")
        params.append(value)
    if before is not None:
        where.append("position < ?")
        params.append(before)
    return f"{SELECT_LOG} WHERE {' AND '.join(where)} ORDER BY position DESC LIMIT ?", (*params, limit)


async def log_page(recorder: Recorder, org_id: str, filters: Sequence[tuple[str, str | int]] = (),
                   before: int | None = None, limit: int = 50) -> list[LogRow]:
    """Up to `limit` of the org's requests matching every (column, value) of `filters`, newest
    first, below position `before` when given."""
    return [LogRow(*row) for row in await recorder._fetch(*log_page_sql(org_id, filters, before, limit))]


async def log_entry(recorder: Recorder, org_id: str, *, position: int | None = None,
                    request_id: str | None = None) -> LogRow | None:
    """The org's request at `position`, or with `request_id`; None for another org's or none."""
    column, key = ("position", position) if request_id is None else ("request_id", request_id)
    rows = await recorder._fetch(f"{SELECT_LOG} WHERE {column} = ? AND org_id = ?", (key, org_id))
    return LogRow(*rows[0]) if rows else None


async def attempts(recorder: Recorder, position: int) -> tuple[Attempt, ...]:
    """The upstream calls of the request recorded at `position`, as its event holds them (the
    log's row is the event's projection; the attempts are read from the event itself)."""
    recorded = await recorder.read(position - 1, 1)
    event = recorded[0].event if recorded and recorded[0].position == position else None
    return event.attempts if isinstance(event, RequestCompleted) else ()


async def text(recorder: Recorder, content_id: str) -> Text | None:
    rows = await recorder._fetch("SELECT body, removed_at_us FROM content WHERE content_id = ?", (content_id,))
    return Text(_bytes(rows[0][0]), rows[0][1]) if rows else None


async def track_text_ids(recorder: Recorder, request_id: str) -> tuple[str, str] | None:
    """A music request's prompt and lyrics content ids ("": not kept); None for other requests."""
    rows = await recorder._fetch("SELECT prompt_content_id, text_content_id FROM music_tracks WHERE request_id = ?",
                                 (request_id,))
    return (rows[0][0], rows[0][1]) if rows else None


async def org_tracks(recorder: Recorder, org_id: str, limit: int) -> list[TrackRow]:
    """The org's latest `limit` tracks, newest first."""
    rows = await recorder._fetch(TRACKS + " WHERE m.org_id = ? ORDER BY m.position DESC LIMIT ?", (org_id, limit))
    return [_track(row) for row in rows]


async def track(recorder: Recorder, request_id: str) -> TrackRow | None:
    """A track by its request id, whichever org's it is."""
    rows = await recorder._fetch(TRACKS + " WHERE m.request_id = ?", (request_id,))
    return _track(rows[0]) if rows else None


async def track_at(recorder: Recorder, org_id: str, position: int) -> TrackRow | None:
    """The org's track whose request sits at `position` in the log."""
    rows = await recorder._fetch(TRACKS + " WHERE r.position = ? AND r.org_id = ?", (position, org_id))
    return _track(rows[0]) if rows else None
