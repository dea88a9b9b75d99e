"""What files read back from the ledger: the `files` projection (ledger.events.FileStored,
FileDeleted). Every SQL that reads a kept file lives here; the gateway's Files API and the
sweeper read through these functions.
"""

import msgspec

from ledger.recorder import Recorder

COLUMNS = ("file_id, org_id, position, created_at_us, purpose, filename, bytes, lines, sha256, object_key, storage,"
           " expires_at_us, key_id, deleted_at_us, expired")
ONE = f"SELECT {COLUMNS} FROM files WHERE file_id = ? AND org_id = ?"
# Listed: neither deleted nor past expiry. Served by files_by_org (org_id, position).
_LISTED = f"SELECT {COLUMNS} FROM files WHERE org_id = ? AND deleted_at_us IS NULL AND expires_at_us > ?"
# Due: the partial index files_kept holds exactly the rows not deleted, by expires_at_us.
DUE = (f"SELECT {COLUMNS} FROM files WHERE deleted_at_us IS NULL AND expires_at_us < ?"
       " AND expires_at_us >= ? AND (expires_at_us > ? OR file_id > ?) ORDER BY expires_at_us, file_id LIMIT ?")


class FileRow(msgspec.Struct, frozen=True, array_like=True):
    """One kept file as the projection holds it."""

    file_id: str
    org_id: str
    position: int
    created_at_us: int
    purpose: str
    filename: str
    bytes: int
    lines: int
    sha256: str
    object_key: str
    storage: str
    expires_at_us: int
    key_id: str
    deleted_at_us: int | None
    expired: bool


def _rows(rows: list[tuple]) -> list[FileRow]:
    return [msgspec.convert(row, FileRow, strict=False) for row in rows]  # expired: 0/1 as a bool


async def file(recorder: Recorder, org_id: str, file_id: str) -> FileRow | None:
    """The org's file, deleted or not; None for an unknown id or another org's file."""
    rows = _rows(await recorder._fetch(ONE, (file_id, org_id)))
    return rows[0] if rows else None


def _page_sql(purpose: str, newest_first: bool) -> str:
    where = " AND purpose = ?" if purpose else ""
    order = "DESC" if newest_first else "ASC"
    return f"{_LISTED}{where} AND position {'<' if newest_first else '>'} ? ORDER BY position {order} LIMIT ?"


async def page(recorder: Recorder, org_id: str, now_us: int, *, purpose: str = "", after_position: int | None = None,
               limit: int = 100, newest_first: bool = True) -> list[FileRow]:
    """The org's files neither deleted nor expired at `now_us` (of `purpose`, when given), in
    upload order or newest first, after the one at `after_position`."""
    start = after_position if after_position is not None else (2**62 if newest_first else -1)
    params = (org_id, now_us, *((purpose,) if purpose else ()), start, limit)
    return _rows(await recorder._fetch(_page_sql(purpose, newest_first), params))


async def due_page(recorder: Recorder, before_us: int, after: tuple[int, str] = (-1, ""),
                   limit: int = 1000) -> list[FileRow]:
    """Up to `limit` files not deleted whose expiry is before `before_us`, soonest expired first,
    after the file keyed (expires_at_us, file_id) `after`."""
    return _rows(await recorder._fetch(DUE, (before_us, after[0], after[0], after[1], limit)))
