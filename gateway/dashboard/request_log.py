"""The organization's request log (GET /v1/logs, GET /v1/logs/{id}), newest first.

Pages are keyed by position (`before=log_<position>`), never by offset: each filter has an
index on (org_id, <filter>, position), so any page costs one index range read however deep it
is and however long the log has grown.
"""

from collections.abc import Mapping
from datetime import UTC, datetime
from decimal import Decimal

import msgspec

from gateway.edge.parsing import LOG_ID_PREFIX, WholeNumber, log_position
from gateway.edge.errors import ApiError, bad_request
from gateway import content
from gateway.jsonio import number
from gateway.services import Caller, Services
from ledger import log_queries
from ledger.log_queries import LogRow
from ledger.money import from_nano
from ledger.schema import LOG_FILTERS

DEFAULT_LIMIT = 50
MAX_LIMIT = 200
FILTERS = LOG_FILTERS
PARAMETERS = frozenset({"limit", "before", *FILTERS})
LIMIT = WholeNumber("limit", 1, MAX_LIMIT, DEFAULT_LIMIT, "entries on the page")
STATUS = WholeNumber("status", 100, 599, None, description="only requests answered with this HTTP status")


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
    filters = tuple((name, STATUS.parse(query[name]) if name == "status" else query[name])
                    for name in FILTERS if query.get(name))
    return LogQuery(limit, before, filters)


def position_of(log_id: str, name: str) -> int:
    """The position a `log_<n>` id names."""
    if (position := log_position(log_id, name)) is None:
        raise bad_request(f"{name} must be a log id such as 'log_123' (a page's next_cursor), got {log_id!r}", name)
    return position


def page_sql(org_id: str, query: LogQuery) -> tuple[str, tuple]:
    """The statement of a page's read (see `page`), for a look at its plan."""
    return log_queries.log_page_sql(org_id, query.filters, query.before, query.limit + 1)


async def page(services: Services, caller: Caller, query: LogQuery) -> dict:
    """One page of the caller's log, newest first, and the cursor of the next one."""
    # One row more than the page, to tell whether more follow.
    rows = await log_queries.log_page(services.recorder, caller.org_id, query.filters, query.before, query.limit + 1)
    more = len(rows) > query.limit
    entries = [entry(row) for row in rows[:query.limit]]
    return {"object": "list", "data": entries, "has_more": more,
            "next_cursor": entries[-1]["log_id"] if more else None}


def entry(row: LogRow) -> dict:
    """One request as the log shows it: what it cost, at which rate, and what the balance paid."""
    (request_id, position, at_us, route, model, provider, status, stream, key_id, prompt, completion,
     usd, inr, charged, rate, latency, error, _content_id, anomaly, price_version, price_tier, batch_id,
     custom_id) = row
    return {"id": request_id, "object": "request.log", "log_id": f"{LOG_ID_PREFIX}{position}",
            "created": at_us // 1_000_000, "created_at": iso_time(at_us), "route": route, "model": model,
            "provider": provider, "status": status, "stream": bool(stream), "key_id": key_id,
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                      "total_tokens": prompt + completion},
            "cost_usd": number(from_nano(usd)), "cost_inr": number(from_nano(inr)),
            "charged_inr": number(from_nano(charged)), "usd_to_inr": _rate(rate),
            "latency_ms": latency, "error": error or None, "anomaly": anomaly or None,
            "price_version": price_version or None, "price_tier": price_tier or None,
            "batch_id": batch_id or None, "custom_id": custom_id or None}


def _rate(text: str) -> msgspec.Raw | None:
    """The USD->INR rate a request was priced at; None when it was never priced (it failed first)."""
    rate = Decimal(text)
    return number(rate) if rate else None


def iso_time(at_us: int) -> str:
    return datetime.fromtimestamp(at_us / 1_000_000, UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


async def detail(services: Services, caller: Caller, log_id: str) -> dict:
    """One request of the caller's: its log entry, every provider it tried (`attempts`, in order;
    the last answered, or failed last), and its prompt and response text if they are kept."""
    if (position := log_position(log_id, "id")) is not None:
        row = await log_queries.log_entry(services.recorder, caller.org_id, position=position)
    else:
        row = await log_queries.log_entry(services.recorder, caller.org_id, request_id=log_id)
    if row is None:  # the same answer for another org's request as for none at all
        raise ApiError(404, f"no request {log_id} in this organization's log", type="not_found")
    text, state = await _content(services, row.request_id, row.content_id)
    attempts = await log_queries.attempts(services.recorder, row.position)
    return {**entry(row), "attempts": [msgspec.to_builtins(attempt) for attempt in attempts], "content": text,
            "content_state": state}


async def _content(services: Services, request_id: str, content_id: str) -> tuple[dict | None, str]:
    """The request's text as {"request", "response"}, and whether it is kept, removed or was never kept.

    Chat and audio keep one content row holding both; music keeps the prompt and the lyrics apart
    (and its request log row names the prompt's)."""
    track = await log_queries.track_text_ids(services.recorder, request_id)
    ids = track if track is not None else (content_id,)
    if not any(ids):
        return None, "not_retained"
    texts = [await content.read(services.recorder, i) for i in ids]
    if any(state == "removed" for _, state in texts):
        return None, "removed"
    bodies = [body for body, _ in texts]
    if track is not None:
        return {"request": bodies[0], "response": bodies[1]}, "kept"
    kept = bodies[0] or {}
    text = {"request": kept.get("request"), "response": kept.get("response")}
    return content.marked(text, bool(kept.get("truncated"))), "kept"
