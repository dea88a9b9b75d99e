"""One sweep pass: delete due media first, then mark it expired; then remove old text.

Delete first, then mark: a track is marked only once its object is really gone, so a failed
delete leaves it on the work list for the next pass. A crash between the two is completed by
the next pass (deleting an absent object succeeds), and the ledger accepts one MediaExpired
per track, so sweepers racing over the same list never double-mark.
"""

import asyncio
import time
from datetime import datetime

import msgspec

from ledger import audit, checkpoints, leases, queries
from ledger.signing import Signer
from ledger.events import MediaExpired
from ledger.recorder import Append, AppendRejected, Recorder
from storage.deletion import MAX_KEYS_PER_DELETE, DeleteResult
from storage.files import FileStore
from storage.objects import ObjectStore
from sweeper.file_sweep import sweep_files
from sweeper.worklist import DueTrack, cutoff_us, due_media

NO_STORAGE = "NoStorage: object storage is not configured for this sweeper"


class PassReport(msgspec.Struct, kw_only=True):
    """What one pass found and did; logged as one line."""

    as_of: str
    dry_run: bool
    due: int = 0  # hosted tracks past the retention period at the start of each page
    deleted: int = 0  # objects deleted and marked expired by this pass
    failed: int = 0  # objects whose delete failed; they stay due
    retried: int = 0  # due objects an earlier pass of this process failed to delete
    already_marked: int = 0  # deleted, but another sweeper marked them first
    files_due: int = 0  # kept files past their expiry, not yet deleted
    files_deleted: int = 0  # their bytes deleted and FileDeleted recorded by this pass
    files_already_marked: int = 0
    text_due: int = 0
    text_removed: int = 0
    holds_expired: int = 0  # holds whose lease lapsed (their process gone), released by this pass
    verified_upto: int = 0  # the last position the ledger verified to, when this pass verified it
    checkpoint: int | None = None  # where this pass recorded a checkpoint (ledger.checkpoints)
    ledger_problems: list[str] = []  # what that verification found (at most ten)
    failures: dict[str, str] = {}  # a sample of failed keys and why
    would_delete: list[str] = []  # with dry_run: the object keys a real pass would delete
    duration_ms: int = 0


class Sweeper:
    """Sweeps one ledger and one bucket; keeps which keys failed, to count retries."""

    def __init__(self, recorder: Recorder, store: ObjectStore | None, retention_days: int,
                 text_days: int = 0, page: int = MAX_KEYS_PER_DELETE, checkpoint_interval_s: float = 0,
                 signer: Signer | None = None, files: FileStore | None = None,
                 origin: str = checkpoints.ORIGIN) -> None:
        self._recorder, self._store, self._page, self._files = recorder, store, page, files
        self._checkpoint_interval_s, self._signer, self._origin = checkpoint_interval_s, signer, origin
        self._retention_days, self._text_days = retention_days, text_days
        self._failed_before: set[str] = set()
        self.stopping = asyncio.Event()  # set to end the pass after the page in hand

    async def run_pass(self, as_of: datetime, dry_run: bool = False) -> PassReport:
        started = time.monotonic()
        report = PassReport(as_of=as_of.isoformat(), dry_run=dry_run)
        failed: dict[str, str] = {}
        async for tracks in due_media(self._recorder, cutoff_us(as_of, self._retention_days), self._page):
            report.due += len(tracks)
            if dry_run:
                report.would_delete += [t.object_key for t in tracks]
            else:
                await self._sweep_page(tracks, report, failed)
            if self.stopping.is_set():
                break
        await self._sweep_files(as_of, dry_run, report, failed)
        self._failed_before = set(failed)
        report.failed, report.failures = len(failed), dict(list(failed.items())[:10])
        await self._text(as_of, dry_run, report)
        if not dry_run:  # by the ledger's clock, not as_of: a lease is about now
            report.holds_expired = await leases.expire(self._recorder)
            await self._verify(report)
        report.duration_ms = int((time.monotonic() - started) * 1000)
        return report

    async def _sweep_files(self, as_of: datetime, dry_run: bool, report: PassReport,
                           failed: dict[str, str]) -> None:
        swept = await sweep_files(self._recorder, self._files, cutoff_us(as_of, 0), dry_run=dry_run,
                                  page=self._page, stopping=self.stopping)
        report.files_due, report.files_deleted, report.files_already_marked = (
            swept.due, swept.deleted, swept.already_marked)
        report.would_delete += swept.would_delete
        failed.update(swept.failed)

    async def _verify(self, report: PassReport) -> None:
        """Verify what was appended since the last checkpoint and record a new one, once the last
        is `checkpoint_interval_s` old (0: never)."""
        if not self._checkpoint_interval_s:
            return
        latest = await checkpoints.latest(self._recorder)
        if latest is not None and latest.age_s() < self._checkpoint_interval_s:
            return
        verified, report.checkpoint = await audit.keep_verified(self._recorder, signer=self._signer,
                                                                origin=self._origin)
        report.verified_upto, report.ledger_problems = verified.upto, verified.problems[:10]

    async def _sweep_page(self, tracks: list[DueTrack], report: PassReport, failed: dict[str, str]) -> None:
        report.retried += sum(t.object_key in self._failed_before for t in tracks)
        result = await self._delete([t.object_key for t in tracks])
        failed.update(result.failed)
        gone = set(result.deleted)
        marked, already = await self._mark([t for t in tracks if t.object_key in gone])
        report.deleted += marked
        report.already_marked += already

    async def _delete(self, keys: list[str]) -> DeleteResult:
        if self._store is None:
            return DeleteResult(deleted=[], failed=dict.fromkeys(keys, NO_STORAGE))
        return await self._store.delete_many(keys)

    async def _mark(self, tracks: list[DueTrack]) -> tuple[int, int]:
        """Append one MediaExpired per track, all in one transaction; (marked, marked before)."""
        units = [Append(t.org_id, [MediaExpired(request_id=t.request_id, object_key=t.object_key)])
                 for t in tracks]
        outcomes = await self._recorder.append(units)
        for outcome in outcomes:
            if isinstance(outcome, Exception) and not isinstance(outcome, AppendRejected):
                raise outcome
        already = sum(isinstance(o, AppendRejected) for o in outcomes)
        return len(outcomes) - already, already

    async def _text(self, as_of: datetime, dry_run: bool, report: PassReport) -> None:
        """Remove logged text older than text_days from the content store (never media)."""
        if not self._text_days:
            return
        before = cutoff_us(as_of, self._text_days)
        report.text_due = await queries.due_text_count(self._recorder, before)
        while not dry_run and not self.stopping.is_set():
            removed = await self._recorder.remove_text(before, time.time_ns() // 1000, self._page)
            report.text_removed += removed
            if removed < self._page:
                break
