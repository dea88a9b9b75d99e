"""The organization's batches as the dashboard lists them (GET /v1/dashboard/batches): both APIs'
batches (/v1/batches and /v1/messages/batches) in one list, newest first, each with its progress,
its cost so far and the files it wrote (downloaded from GET /v1/files/{id}/content).

Pages are keyed by the last batch shown (`before`), read by position on the (org_id, position)
index, so a deep page costs what the first does.
"""

from gateway.edge.errors import bad_request
from gateway.edge.parsing import WholeNumber
from gateway.jsonio import number
from gateway.services import Caller, Services
from ledger import batch_queries
from ledger.batch_queries import BatchRow
from ledger.money import from_nano

LIMIT = WholeNumber("limit", 1, 100, 50, "batches on the page")
US = 1_000_000


async def page(services: Services, caller: Caller, limit: int, before: str | None) -> dict:
    """One page of the caller's batches after the batch `before`, and the cursor of the next one."""
    position = await _position(services, caller, before)
    rows = await batch_queries.org_page(services.recorder, caller.org_id, position, limit + 1)  # one more: has_more
    data = [entry(row) for row in rows[:limit]]
    more = len(rows) > limit
    return {"object": "list", "data": data, "has_more": more, "next_cursor": data[-1]["id"] if more else None}


async def _position(services: Services, caller: Caller, before: str | None) -> int | None:
    if not before:
        return None
    row = await batch_queries.batch(services.recorder, caller.org_id, before)
    if row is None:  # another org's batch is as unknown as none at all
        raise bad_request(f"before must be a batch of this organization (a page's next_cursor), got {before!r}",
                          "before")
    return row.position


def entry(row: BatchRow) -> dict:
    """A batch as the dashboard shows it: status, lines done of its total, cost so far, files."""
    return {"id": row.batch_id, "object": "dashboard.batch", "api": row.api, "endpoint": row.endpoint,
            "model": row.model, "provider": row.provider, "native": bool(row.native), "status": row.state,
            "request_counts": {"total": row.lines, "completed": row.succeeded, "failed": row.failed},
            "cost_inr": number(from_nano(row.charged_inr_nano)), "created_at": row.created_at_us // US,
            "ended_at": None if row.ended_at_us is None else row.ended_at_us // US,
            "output_file_id": row.output_file_id or None, "error_file_id": row.error_file_id or None}
