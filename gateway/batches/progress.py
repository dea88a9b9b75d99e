"""What both ways of running a batch share: who its lines bill, their request ids, its input read
again line by line, and when it must stop (cancelled, or its 24 hours over)."""

import time
from collections.abc import AsyncIterator

from gateway.accounts.directory import Principal
from gateway.batches import files
from gateway.batches.lines import Line, parse, split
from gateway.edge.errors import ApiError
from gateway.services import Caller, Services
from ledger import batch_queries
from ledger.batch_queries import BatchRow

CHECK_S = 1.0  # how often a running batch reads whether it was cancelled


def request_id(row: BatchRow, index: int) -> str:
    """The request id of the batch's line at `index`: the same whichever process runs it, so its
    content id (and so a batch's content, `content_prefix`) follows from the batch."""
    return f"req_{row.batch_id.partition('_')[2]}_{index:05d}"


def content_prefix(row: BatchRow) -> str:
    """What the content id of every line of the batch begins with (gateway.billing.charging.retained)."""
    return f"cnt_{row.batch_id.partition('_')[2]}_"


def caller_of(row: BatchRow, request: str, custom_id: str = "") -> Caller:
    """A caller for the batch's line: billed to the org and key that created the batch."""
    return Caller(Principal(key_id=row.key_id, org_id=row.org_id), request, batch_id=row.batch_id,
                  custom_id=custom_id)


async def input_lines(services: Services, row: BatchRow) -> AsyncIterator[Line]:
    """The batch's lines, read again from its input file (checked when the batch was created)."""
    record = await files.stored_file(services, row.org_id, row.input_file_id)
    if record is None:
        raise ApiError(410, f"the batch's input file {row.input_file_id} is gone", type="invalid_request_error")
    index = 0
    async for raw in split(files.read_file(services, record)):
        yield parse(row.api, index, raw, row.endpoint)
        index += 1


class Watch:
    """Whether a running batch must stop, read at most every CHECK_S: `why` it stopped, if it did."""

    def __init__(self, services: Services, row: BatchRow) -> None:
        self.services, self.row = services, row
        self.why: str | None = None
        self.checked = 0.0

    async def stopped(self) -> bool:
        if self.why is None and time.monotonic() - self.checked >= CHECK_S:
            self.checked = time.monotonic()
            self.why = await stop_reason(self.services, self.row)
        return self.why is not None


async def stop_reason(services: Services, row: BatchRow) -> str | None:
    """"cancelled" once the batch's cancel was asked for, "expired" past its window, else None."""
    now = await batch_queries.batch(services.recorder, row.org_id, row.batch_id)
    if now is not None and now.cancel_requested_at_us is not None:
        return "cancelled"
    return "expired" if services.recorder.clock() >= row.expires_at_us else None
