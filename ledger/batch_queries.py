"""What batches read back from the ledger: the `batches` projection and their lines' records.

Every SQL that reads a batch or its lines lives here (the projections are ledger.projections').
"""

import msgspec

from ledger.recorder import Recorder

COLUMNS = ("batch_id, org_id, position, key_id, api, endpoint, model, provider, native, input_file_id, lines,"
           " hold_id, completion_window, metadata, created_at_us, expires_at_us, upstream_id, cancel_requested_at_us,"
           " status, ended_at_us, output_file_id, error_file_id, errors, succeeded, failed, charged_inr_nano,"
           " prompt_tokens, completion_tokens")
ONE = f"SELECT {COLUMNS} FROM batches WHERE batch_id = ? AND org_id = ?"
PAGE = (f"SELECT {COLUMNS} FROM batches WHERE org_id = ? AND api = ? AND position < ?"
        " ORDER BY position DESC LIMIT ?")
RUNNING = f"SELECT {COLUMNS} FROM batches WHERE ended_at_us IS NULL ORDER BY created_at_us LIMIT ?"
RECORDED = ("SELECT custom_id FROM request_log WHERE batch_id = ? AND batch_id <> '' AND custom_id > ?"
            " ORDER BY batch_id, custom_id LIMIT ?")
LINES = ("SELECT custom_id, request_id, status, error, content_id FROM request_log WHERE batch_id = ?"
         " AND batch_id <> '' AND custom_id > ? ORDER BY batch_id, custom_id LIMIT ?")
CONTENT = "SELECT content_id, body FROM content WHERE content_id IN ({})"
PAGE_ROWS = 1000


class BatchRow(msgspec.Struct, frozen=True, array_like=True):
    """One batch as the projection holds it."""

    batch_id: str
    org_id: str
    position: int
    key_id: str
    api: str
    endpoint: str
    model: str
    provider: str
    native: int
    input_file_id: str
    lines: int
    hold_id: str
    completion_window: str
    metadata: str
    created_at_us: int
    expires_at_us: int
    upstream_id: str
    cancel_requested_at_us: int | None
    status: str  # "" while it runs: see `state`
    ended_at_us: int | None
    output_file_id: str
    error_file_id: str
    errors: str
    succeeded: int
    failed: int
    charged_inr_nano: int
    prompt_tokens: int
    completion_tokens: int

    @property
    def state(self) -> str:
        """completed, failed, expired, cancelled once ended; else cancelling or in_progress."""
        if self.status:
            return self.status
        return "cancelling" if self.cancel_requested_at_us is not None else "in_progress"


class LineRow(msgspec.Struct, frozen=True, array_like=True):
    """A batch line's record: its custom_id, request, status, error and the content of its answer."""

    custom_id: str
    request_id: str
    status: int
    error: str
    content_id: str


def _rows(rows: list[tuple]) -> list[BatchRow]:
    return [msgspec.convert(row, BatchRow) for row in rows]


async def batch(recorder: Recorder, org_id: str, batch_id: str) -> BatchRow | None:
    """The org's batch, or None (another org's is None too)."""
    rows = _rows(await recorder._fetch(ONE, (batch_id, org_id)))
    return rows[0] if rows else None


async def page(recorder: Recorder, org_id: str, api: str, before_position: int | None, limit: int) -> list[BatchRow]:
    """The org's batches asked in `api`'s shape, newest first, before the one at `before_position`."""
    return _rows(await recorder._fetch(PAGE, (org_id, api, before_position or 2**62, limit)))


async def running(recorder: Recorder, limit: int = 1000) -> list[BatchRow]:
    """Batches not yet ended, oldest first."""
    return _rows(await recorder._fetch(RUNNING, (limit,)))


async def recorded(recorder: Recorder, batch_id: str) -> set[str]:
    """The custom_id of every line of the batch already recorded."""
    done: set[str] = set()
    after = ""
    while rows := await recorder._fetch(RECORDED, (batch_id, after, PAGE_ROWS)):
        done.update(row[0] for row in rows)
        after = rows[-1][0]
    return done


async def lines(recorder: Recorder, batch_id: str, after: str = "", limit: int = PAGE_ROWS) -> list[LineRow]:
    """The batch's recorded lines after custom_id `after`, in custom_id order."""
    return [LineRow(*row) for row in await recorder._fetch(LINES, (batch_id, after, limit))]


async def contents(recorder: Recorder, content_ids: list[str]) -> dict[str, bytes]:
    """The bodies of these content rows still kept, by id."""
    wanted = [c for c in content_ids if c]
    if not wanted:
        return {}
    rows = await recorder._fetch(CONTENT.format(", ".join("?" * len(wanted))), wanted)
    return {content_id: bytes(body) for content_id, body in rows if body is not None}


UPSTREAM_IDS = "SELECT upstream_id FROM batches WHERE provider = ? AND upstream_id <> ''"


async def upstream_ids(recorder: Recorder, provider: str) -> list[str]:
    """Every upstream batch some batch of the provider's was sent as."""
    return [row[0] for row in await recorder._fetch(UPSTREAM_IDS, (provider,))]


# The webhooks' batch alerts (gateway.webhooks.alerts) and the dashboard's batch list read these.
OF_IDS = f"SELECT {COLUMNS} FROM batches WHERE org_id = ? AND batch_id IN ({{}})"
ORG_PAGE = f"SELECT {COLUMNS} FROM batches WHERE org_id = ? AND position < ? ORDER BY position DESC LIMIT ?"


async def of_ids(recorder: Recorder, org_id: str, batch_ids: list[str]) -> dict[str, BatchRow]:
    """The org's batches among these ids, by id (another org's are left out)."""
    if not batch_ids:
        return {}
    rows = await recorder._fetch(OF_IDS.format(", ".join("?" * len(batch_ids))), (org_id, *batch_ids))
    return {row.batch_id: row for row in _rows(rows)}


async def org_page(recorder: Recorder, org_id: str, before_position: int | None, limit: int) -> list[BatchRow]:
    """The org's batches of either API, newest first, before the one at `before_position`."""
    return _rows(await recorder._fetch(ORG_PAGE, (org_id, before_position or 2**62, limit)))


READING = "SELECT batch_id FROM batches WHERE org_id = ? AND input_file_id = ? AND ended_at_us IS NULL LIMIT 1"


async def reading(recorder: Recorder, org_id: str, file_id: str) -> str | None:
    """The running batch of the org whose input is `file_id`, if one is."""
    rows = await recorder._fetch(READING, (org_id, file_id))
    return rows[0][0] if rows else None
