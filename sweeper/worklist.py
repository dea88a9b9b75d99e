"""What a pass has to do, read from the ledger's projections.

Both queries are served by partial indexes that hold only what is still due (hosted tracks
not yet expired; text not yet removed), so a pass costs time in proportion to its work.
"""

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import msgspec

from ledger.recorder import Recorder

# Keyset paging: a key whose delete failed stays due, so paging by offset or by "still due"
# would either skip tracks or loop on the failed ones.
DUE_MEDIA = (
    "SELECT created_at_us, request_id, org_id, object_key FROM music_tracks"
    " WHERE storage = 's3' AND error = 0 AND expired_at_us IS NULL AND created_at_us < ?"
    " AND created_at_us >= ? AND (created_at_us > ? OR request_id > ?)"
    " ORDER BY created_at_us, request_id LIMIT ?")
DUE_TEXT = "SELECT COUNT(*) FROM content WHERE body IS NOT NULL AND created_at_us < ?"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class DueTrack(msgspec.Struct, frozen=True):
    created_at_us: int
    request_id: str
    org_id: str
    object_key: str


def cutoff_us(as_of: datetime, days: int) -> int:
    """Microseconds since the epoch of `days` before `as_of`: what is older than this is due."""
    return (as_of - timedelta(days=days) - EPOCH) // timedelta(microseconds=1)  # exact, no float


async def due_media(recorder: Recorder, before_us: int, page: int = 1000) -> AsyncIterator[list[DueTrack]]:
    """Hosted tracks recorded before `before_us` and not yet expired, oldest first, in pages."""
    after = (-1, "")
    while rows := await recorder.fetch(DUE_MEDIA, (before_us, after[0], after[0], after[1], page)):
        tracks = [DueTrack(*row) for row in rows]
        yield tracks
        after = (tracks[-1].created_at_us, tracks[-1].request_id)


async def due_text(recorder: Recorder, before_us: int) -> int:
    """How many content rows recorded before `before_us` still hold their text."""
    [(count,)] = await recorder.fetch(DUE_TEXT, (before_us,))
    return count
