"""The sweeper deletes kept files once they expire: bytes first, then FileDeleted(expired=True)."""

import asyncio
from datetime import UTC, datetime, timedelta

from ledger.events import FileDeleted, FileStored, OrgCreated
from ledger.recorder import Append, Recorder
from storage.files import FileStore, LocalFiles, ObjectFiles
from sweeper.settings import load
from sweeper.sweep import Sweeper
from tests.sweeper.sweeper_helpers import as_of, pass_lines, run_sweeper, sweeper_toml

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
HOUR_US = 3_600_000_000


async def keep_files(recorder: Recorder, files: FileStore, tmp_path, count: int, expires_at_us: int,
                     org: str = "acme") -> list[str]:
    """`count` files of `org`, their bytes in `files`, recorded as expiring at `expires_at_us`."""
    if not await recorder.read_stream(org):
        await recorder.append([Append(org, [OrgCreated(name=org)])])
    source = tmp_path / "line.jsonl"
    source.write_bytes(b'{"custom_id": "1"}\n')
    keys = []
    for n in range(count):
        key = f"{org}/file-{expires_at_us}-{n}"
        await files.put(key, str(source), "application/jsonl")
        event = FileStored(file_id=key.rpartition("/")[2], purpose="batch", filename="in.jsonl", bytes=19,
                           sha256="0" * 64, object_key=key, storage=files.kind, expires_at_us=expires_at_us, lines=1)
        [outcome] = await recorder.append([Append(org, [event])])
        assert not isinstance(outcome, Exception), outcome
        keys.append(key)
    return keys


async def deletions(recorder: Recorder) -> list[FileDeleted]:
    return [r.event for r in await recorder.read(0, 100_000) if isinstance(r.event, FileDeleted)]


def instant(us: int) -> datetime:
    return EPOCH + timedelta(microseconds=us)


async def test_expired_files_are_deleted_then_marked_and_live_ones_kept(recorder, tmp_path):
    files = LocalFiles(tmp_path / "files")
    now_us = recorder.clock()
    expiring = await keep_files(recorder, files, tmp_path, 3, now_us + HOUR_US)
    lasting = await keep_files(recorder, files, tmp_path, 2, now_us + 48 * HOUR_US)
    sweeper = Sweeper(recorder, None, 30, files=files)

    dry = await sweeper.run_pass(instant(now_us + 2 * HOUR_US), dry_run=True)
    assert (dry.files_due, dry.files_deleted, sorted(dry.would_delete)) == (3, 0, sorted(expiring))
    assert all([await files.exists(key) for key in expiring]) and await deletions(recorder) == []

    report = await sweeper.run_pass(instant(now_us + 2 * HOUR_US))
    assert (report.files_due, report.files_deleted, report.failed) == (3, 3, 0)
    assert [await files.exists(key) for key in expiring + lasting] == [False] * 3 + [True] * 2
    assert sorted((d.file_id, d.expired) for d in await deletions(recorder)) == sorted(
        (key.rpartition("/")[2], True) for key in expiring)
    again = await sweeper.run_pass(instant(now_us + 2 * HOUR_US))
    assert (again.files_due, again.files_deleted) == (0, 0)


async def test_racing_sweepers_never_double_mark(recorder, tmp_path):
    files = LocalFiles(tmp_path / "files")
    now_us = recorder.clock()
    await keep_files(recorder, files, tmp_path, 20, now_us)
    later = instant(now_us + HOUR_US)
    reports = await asyncio.gather(*(Sweeper(recorder, None, 30, files=files, page=5).run_pass(later)
                                     for _ in range(3)))
    assert len(await deletions(recorder)) == 20
    assert sum(r.files_deleted for r in reports) == 20 and all(r.failed == 0 for r in reports)


async def test_a_file_this_sweeper_cannot_reach_stays_due_and_fails_the_pass(recorder, tmp_path, store):
    now_us = recorder.clock()
    [key] = await keep_files(recorder, ObjectFiles(store), tmp_path, 1, now_us)
    report = await Sweeper(recorder, None, 30, files=LocalFiles(tmp_path / "files")).run_pass(
        instant(now_us + HOUR_US))
    assert (report.files_due, report.files_deleted, report.failed) == (1, 0, 1)
    assert "NoStorage" in report.failures[key] and await deletions(recorder) == []


async def test_the_sweeper_process_deletes_expired_files_in_the_bucket(
        recorder, store, ledger_url, s3_server, s3_bucket, tmp_path):
    files = ObjectFiles(store)
    now_us = recorder.clock()
    [key] = await keep_files(recorder, files, tmp_path, 1, now_us + HOUR_US)
    config = tmp_path / "gateway.toml"
    config.write_text(sweeper_toml(ledger_url, s3_server, s3_bucket))
    early = await run_sweeper(config, "--once", "--as-of", as_of(instant(now_us)))
    assert early.returncode == 0, early.stderr
    assert pass_lines(early.stderr)[0]["files_due"] == 0 and await files.exists(key)
    swept = await run_sweeper(config, "--once", "--as-of", as_of(instant(now_us + 2 * HOUR_US)))
    assert swept.returncode == 0, swept.stderr
    assert pass_lines(swept.stderr)[0]["files_deleted"] == 1
    assert not await files.exists(key)
    assert [d.expired for d in await deletions(recorder)] == [True]


def test_the_sweeper_reads_the_gateways_files_path(tmp_path):
    config = tmp_path / "gateway.toml"
    config.write_text('[batches]\nfiles_path = "/srv/files"\nconcurrency = 4\n')
    assert load(config, {}).batches.files_path == "/srv/files"
    assert load(None, {"GATEWAY_BATCHES_FILES_PATH": "/srv/other"}).batches.files_path == "/srv/other"
