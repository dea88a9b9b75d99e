"""Kept files past their expiry (ledger.events.FileStored's expires_at_us): their bytes deleted
first, then FileDeleted(expired=True) recorded. As with media, a failed delete leaves the file on
the work list for the next pass, and the ledger accepts one FileDeleted per file, so sweepers
racing over the same list never double-mark. The work list is the partial index files_kept.
"""

import asyncio

import msgspec

from ledger import file_queries
from ledger.events import FileDeleted
from ledger.file_queries import FileRow
from ledger.recorder import Append, AppendRejected, Recorder
from storage.errors import StorageError
from storage.files import FileStore


class FilesSwept(msgspec.Struct, kw_only=True):
    """What one pass found and did with expired files."""

    due: int = 0
    deleted: int = 0
    already_marked: int = 0  # deleted, but another sweeper (or the org) recorded it first
    failed: dict[str, str] = {}  # object key -> why its delete failed
    would_delete: list[str] = []  # with dry_run: the keys a real pass would delete


async def sweep_files(recorder: Recorder, files: FileStore | None, before_us: int, *, dry_run: bool = False,
                      page: int = 1000, stopping: asyncio.Event | None = None) -> FilesSwept:
    """Every file not deleted whose expiry is before `before_us`, a page at a time."""
    swept, after = FilesSwept(), (-1, "")
    while rows := await file_queries.due_page(recorder, before_us, after, page):
        after = (rows[-1].expires_at_us, rows[-1].file_id)
        swept.due += len(rows)
        if dry_run:
            swept.would_delete += [row.object_key for row in rows]
        else:
            gone = [row for row in rows if await _delete(files, row, swept.failed)]
            await _mark(recorder, gone, swept)
        if stopping is not None and stopping.is_set():
            break
    return swept


async def _delete(files: FileStore | None, row: FileRow, failed: dict[str, str]) -> bool:
    """Whether the file's bytes are gone now (already absent counts)."""
    if files is None or files.kind != row.storage:
        failed[row.object_key] = f"NoStorage: this sweeper has no {row.storage} file storage configured"
        return False
    try:
        await files.delete(row.object_key)
    except StorageError as exc:
        failed[row.object_key] = str(exc)
        return False
    return True


async def _mark(recorder: Recorder, rows: list[FileRow], swept: FilesSwept) -> None:
    """One FileDeleted(expired) per file, each its own unit of one transaction."""
    if not rows:
        return
    units = [Append(row.org_id, [FileDeleted(file_id=row.file_id, expired=True)]) for row in rows]
    outcomes = await recorder.append(units)
    for outcome in outcomes:
        if isinstance(outcome, Exception) and not isinstance(outcome, AppendRejected):
            raise outcome
    swept.already_marked += sum(isinstance(o, AppendRejected) for o in outcomes)
    swept.deleted += sum(not isinstance(o, Exception) for o in outcomes)
