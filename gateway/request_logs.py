"""The organization's request log (GET /v1/logs, GET /v1/logs/{id}), newest first.

Pages are keyed by position (`before=log_<position>`), never by offset: each filter has an
index on (org_id, <filter>, position), so any page costs one index range read however deep it
is and however long the log has grown.
"""

from collections.abc import Mapping
from datetime import UTC, datetime
from decimal import Decimal

import msgspec

from gateway.errors import ApiError, bad_request
from gateway.jsonio import loads, number
from gateway.edge import MAX_WHOLE, WholeNumber, is_whole
from gateway.services import Caller, Services
from ledger.money import from_nano

DEFAULT_LIMIT = 50
MAX_LIMIT = 200
FILTERS = ("route", "model", "status")
PARAMETERS = frozenset({"limit", "before", *FILTERS})
LIMIT = WholeNumber("limit", 1, MAX_LIMIT, DEFAULT_LIMIT, "entries on the page")
STATUS = WholeNumber("status", 100, 599, description="only requests answered with this HTTP status")
LOG_ID_PREFIX = "log_"
LOG_ID_PATTERN = r"^log_[0-9]{1,19}$"  # what position_of accepts (below 2^63 too)
COLUMNS = ("request_id, position, created_at_us, route, model, provider, status, stream, key_id,"
           " prompt_tokens, completion_tokens, cost_usd_nano, cost_inr_nano, charged_inr_nano,"
           " usd_to_inr, latency_ms, error, content_id")
SELECT = f"SELECT {COLUMNS} FROM request_log"
CONTENT = "SELECT body, removed_at_us FROM content WHERE content_id = ?"
TRACK_TEXT = "SELECT prompt_content_id, text_content_id FROM music_tracks WHERE request_id = ?"


class LogQuery(msgspec.Struct, frozen=True):
    limit: int = DEFAULT_LIMIT
    before: int | None = None  # a position: the page starts below it
    filters: tuple[tuple[str, str | int], ...] = ()


def parse_query(query: Mapping[str, str]) -> LogQuery:
    """The page the query string asks for; 400 naming the first parameter that is wrong."""
    if unknown := sorted(set(query) - PARAMETERS):
        raise bad_request(f"unknown query parameter {unknown[0]!r}; the log takes"
                          f" {', '.join(sorted(PARAMETERS))}", unknown[0])
    limit = LIMIT.read(query)
    before = position_of(query["before"], "before") if "before" in query else None
    filters = tuple((name, STATUS.read(query) if name == "status" else query[name])
                    for name in FILTERS if query.get(name))
    return LogQuery(limit, before, filters)


def position_of(log_id: str, name: str) -> int:
    """The position a `log_<n>` id names."""
    digits = log_id.removeprefix(LOG_ID_PREFIX)
    if digits == log_id or not is_whole(digits, 0, MAX_WHOLE):
        raise bad_request(f"{name} must be a log id such as 'log_123' (a page's next_cursor), got {log_id!r}", name)
    return int(digits)


def page_sql(org_id: str, query: LogQuery) -> tuple[str, tuple]:
    """The statement for one page (one row more than the page, to tell whether more follow)."""
    where, params = ["org_id = ?"], [org_id]
    for name, value in query.filters:
        where.append(f"{name} = ?")
        params.append(value)
    if query.before is not None:
        where.append("position < ?")
        params.append(query.before)
    return f"{SELECT} WHERE {' AND '.join(where)} ORDER BY position DESC LIMIT ?", (*params, query.limit + 1)


async def page(services: Services, caller: Caller, query: LogQuery) -> dict:
    """One page of the caller's log, newest first, and the cursor of the next one."""
    rows = await services.recorder.fetch(*page_sql(caller.org_id, query))
    more = len(rows) > query.limit
    entries = [entry(row) for row in rows[:query.limit]]
    return {"object": "list", "data": entries, "has_more": more,
            "next_cursor": entries[-1]["log_id"] if more else None}


def entry(row: tuple) -> dict:
    """One request as the log shows it: what it cost, at which rate, and what the balance paid."""
    (request_id, position, at_us, route, model, provider, status, stream, key_id, prompt, completion,
     usd, inr, charged, rate, latency, error, _content_id) = row
    return {"id": request_id, "object": "request.log", "log_id": f"log_{position}",
            "created": at_us // 1_000_000, "created_at": iso_time(at_us), "route": route, "model": model,
            "provider": provider, "status": status, "stream": bool(stream), "key_id": key_id,
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                      "total_tokens": prompt + completion},
            "cost_usd": number(from_nano(usd)), "cost_inr": number(from_nano(inr)),
            "charged_inr": number(from_nano(charged)), "usd_to_inr": _rate(rate),
            "latency_ms": latency, "error": error or None}


def _rate(text: str) -> msgspec.Raw | None:
    """The USD->INR rate a request was priced at; None when it was never priced (it failed first)."""
    rate = Decimal(text)
    return number(rate) if rate else None


def iso_time(at_us: int) -> str:
    return datetime.fromtimestamp(at_us / 1_000_000, UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


async def detail(services: Services, caller: Caller, log_id: str) -> dict:
    """One request of the caller's, with its prompt and response text if they are kept."""
    column, key = (("position", position_of(log_id, "id")) if log_id.startswith(LOG_ID_PREFIX)
                   else ("request_id", log_id))
    rows = await services.recorder.fetch(f"{SELECT} WHERE {column} = ? AND org_id = ?", (key, caller.org_id))
    if not rows:  # the same answer for another org's request as for none at all
        raise ApiError(404, f"no request {log_id} in this organization's log", type="not_found")
    content, state = await _content(services, rows[0][0], rows[0][-1])
    return {**entry(rows[0]), "content": content, "content_state": state}


async def _content(services: Services, request_id: str, content_id: str) -> tuple[dict | None, str]:
    """The request's text as {"request", "response"}, and whether it is kept, removed or was never kept.

    Chat and audio keep one content row holding both; music keeps the prompt and the lyrics apart
    (and its request log row names the prompt's)."""
    track = await _track_text_ids(services, request_id)
    ids = track if track is not None else (content_id,)
    if not any(ids):
        return None, "not_retained"
    texts = [await _text(services, i) if i else (None, False) for i in ids]
    if any(removed for _, removed in texts):
        return None, "removed"
    bodies = [loads(body) if body is not None else None for body, _ in texts]
    if track is not None:
        return {"request": bodies[0], "response": bodies[1]}, "kept"
    kept = bodies[0] or {}
    return {"request": kept.get("request"), "response": kept.get("response")}, "kept"


async def _track_text_ids(services: Services, request_id: str) -> tuple[str, str] | None:
    """A music request's prompt and lyrics content ids; None for other requests."""
    rows = await services.recorder.fetch(TRACK_TEXT, (request_id,))
    return tuple(rows[0]) if rows else None


async def _text(services: Services, content_id: str) -> tuple[bytes | None, bool]:
    """A content row's body (None once removed) and whether it was removed."""
    rows = await services.recorder.fetch(CONTENT, (content_id,))
    if not rows:
        return None, False
    body, removed_at = rows[0]
    return (bytes(body) if body is not None else None), removed_at is not None
