"""What a pass has to do, read from the ledger's projections.

Both queries are served by partial indexes that hold only what is still due (hosted tracks
not yet expired; text not yet removed), so a pass costs time in proportion to its work.
"""

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

from ledger import queries
from ledger.queries import DueTrack
from ledger.recorder import Recorder

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def cutoff_us(as_of: datetime, days: int) -> int:
    """Microseconds since the epoch of `days` before `as_of`: what is older than this is due."""
    return (as_of - timedelta(days=days) - EPOCH) // timedelta(microseconds=1)  # exact, no float


async def due_media(recorder: Recorder, before_us: int, page: int = 1000) -> AsyncIterator[list[DueTrack]]:
    """Hosted tracks recorded before `before_us` and not yet expired, oldest first, in pages."""
    after = (-1, "")
    while tracks := await queries.due_media_page(recorder, before_us, after, page):
        yield tracks
        after = (tracks[-1].created_at_us, tracks[-1].request_id)

