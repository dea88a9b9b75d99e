"""One pass of the sweeper, in process, against a real SQLite ledger and the S3 API server."""

import asyncio
import json
from datetime import UTC, datetime, timedelta

from ledger import audit, checkpoints, notes
from ledger.backends.sqlite import SQLiteRecorder
from ledger.signing import Signer
from storage.objects import ObjectStore
from tests.support import count_objects
from sweeper.sweep import NO_STORAGE, Sweeper
from ledger.queries import DUE_MEDIA, DUE_TEXT
from tests.ledger.ledger_helpers import run_sql
from tests.sweeper.sweeper_helpers import DAY, created_at, expiry_events, host_tracks

MICROSECOND = timedelta(microseconds=1)


def deny_deletes(bucket: str, prefix: str) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": [{
        "Effect": "Deny", "Principal": "*", "Action": "s3:DeleteObject",
        "Resource": f"arn:aws:s3:::{bucket}/{prefix}*"}]})


async def expired_ids(recorder) -> list[str]:
    rows = await recorder._fetch("SELECT request_id FROM music_tracks WHERE expired_at_us IS NOT NULL"
                                " ORDER BY request_id")
    return [request_id for (request_id,) in rows]


async def test_a_track_is_due_only_once_strictly_older_than_the_retention_period(recorder, store, s3_client):
    await host_tracks(recorder, s3_client, store.bucket, 2)
    created = await created_at(recorder)
    sweeper = Sweeper(recorder, store, retention_days=30)
    for moment in (created + 29 * DAY, created + 30 * DAY):
        report = await sweeper.run_pass(moment)
        assert (report.due, report.deleted) == (0, 0)
    assert await count_objects(s3_client, store.bucket) == 2

    report = await sweeper.run_pass(created + 30 * DAY + MICROSECOND)
    assert (report.due, report.deleted, report.failed) == (2, 2, 0)
    assert await count_objects(s3_client, store.bucket) == 0


async def test_delete_first_then_mark_once_and_a_second_pass_does_nothing(recorder, store, s3_client):
    keys = await host_tracks(recorder, s3_client, store.bucket, 5)
    later = await created_at(recorder) + 31 * DAY
    sweeper = Sweeper(recorder, store, retention_days=30)

    first = await sweeper.run_pass(later)
    second = await sweeper.run_pass(later)

    assert (first.due, first.deleted, first.failed, first.already_marked) == (5, 5, 0, 0)
    assert (second.due, second.deleted) == (0, 0)
    assert sorted(e.object_key for e in await expiry_events(recorder)) == keys
    assert len(await expired_ids(recorder)) == 5
    assert (await audit.verify(recorder))[1] == []


async def test_over_1000_due_objects_are_deleted_in_batches_of_at_most_1000(recorder, store, s3_client):
    keys = await host_tracks(recorder, s3_client, store.bucket, 1203)
    requests: list[int] = []
    s3_client.meta.events.register("before-parameter-build.s3.DeleteObjects",
                                   lambda params, **_: requests.append(len(params["Delete"]["Objects"])))
    sweeper = Sweeper(recorder, ObjectStore(s3_client, store.bucket), retention_days=30)

    report = await sweeper.run_pass(await created_at(recorder) + 31 * DAY)

    assert requests == [1000, 203]
    assert (report.due, report.deleted, report.failed) == (1203, 1203, 0)
    assert await count_objects(s3_client, store.bucket) == 0
    assert len(await expiry_events(recorder)) == len(keys)


async def test_per_key_failures_stay_due_and_are_retried_next_pass(recorder, store, s3_client):
    locked = await host_tracks(recorder, s3_client, store.bucket, 3, org="acme")
    free = await host_tracks(recorder, s3_client, store.bucket, 2, org="beta")
    await s3_client.put_bucket_policy(Bucket=store.bucket, Policy=deny_deletes(store.bucket, "acme/"))
    sweeper = Sweeper(recorder, store, retention_days=30)
    later = await created_at(recorder) + 31 * DAY

    report = await sweeper.run_pass(later)

    assert (report.due, report.deleted, report.failed, report.retried) == (5, 2, 3, 0)
    assert sorted(report.failures) == locked
    assert all(why.startswith("AccessDenied") for why in report.failures.values())
    assert sorted(e.object_key for e in await expiry_events(recorder)) == free

    await s3_client.delete_bucket_policy(Bucket=store.bucket)
    retry = await sweeper.run_pass(later)
    assert (retry.due, retry.deleted, retry.failed, retry.retried) == (3, 3, 0, 3)
    assert await count_objects(s3_client, store.bucket) == 0
    assert len(await expiry_events(recorder)) == 5


async def test_a_whole_request_failure_marks_nothing_and_the_next_pass_completes(recorder, store, s3_client):
    await host_tracks(recorder, s3_client, store.bucket, 4)
    calls = []

    def first_request_to_a_missing_bucket(params, **_):
        calls.append(params["Bucket"])
        if len(calls) == 1:
            params["Bucket"] = "bucket-that-does-not-exist"
    s3_client.meta.events.register("before-parameter-build.s3.DeleteObjects", first_request_to_a_missing_bucket)
    sweeper = Sweeper(recorder, ObjectStore(s3_client, store.bucket), retention_days=30)
    later = await created_at(recorder) + 31 * DAY

    failed = await sweeper.run_pass(later)
    assert (failed.deleted, failed.failed) == (0, 4)
    assert all(why.startswith("NoSuchBucket") for why in failed.failures.values())
    assert await expiry_events(recorder) == [] and await count_objects(s3_client, store.bucket) == 4

    completed = await sweeper.run_pass(later)
    assert (completed.deleted, completed.failed, completed.retried) == (4, 0, 4)
    assert await count_objects(s3_client, store.bucket) == 0


async def test_dry_run_reports_what_would_be_deleted_and_changes_nothing(recorder, store, s3_client):
    keys = await host_tracks(recorder, s3_client, store.bucket, 3)
    report = await Sweeper(recorder, store, retention_days=30).run_pass(
        await created_at(recorder) + 31 * DAY, dry_run=True)
    assert (report.due, report.deleted, report.would_delete) == (3, 0, keys)
    assert await count_objects(s3_client, store.bucket) == 3 and await expiry_events(recorder) == []


async def test_without_object_storage_due_media_fails_and_stays_due(recorder, store, s3_client):
    await host_tracks(recorder, s3_client, store.bucket, 2)
    report = await Sweeper(recorder, None, retention_days=30).run_pass(await created_at(recorder) + 31 * DAY)
    assert (report.due, report.deleted, report.failed) == (2, 0, 2)
    assert set(report.failures.values()) == {NO_STORAGE}
    assert await expiry_events(recorder) == []


async def test_stopping_finishes_the_page_in_hand_and_leaves_the_rest(recorder, store, s3_client):
    await host_tracks(recorder, s3_client, store.bucket, 5)
    sweeper = Sweeper(recorder, store, retention_days=30, page=2)
    sweeper.stopping.set()
    report = await sweeper.run_pass(await created_at(recorder) + 31 * DAY)
    assert (report.due, report.deleted) == (2, 2)
    assert await count_objects(s3_client, store.bucket) == 3


async def test_two_sweepers_racing_over_one_list_mark_each_track_exactly_once(recorder, store, s3_client, ledger_url):
    keys = await host_tracks(recorder, s3_client, store.bucket, 300)
    other = SQLiteRecorder.from_url(ledger_url)
    await other.open()
    try:
        later = await created_at(recorder) + 31 * DAY
        reports = await asyncio.gather(Sweeper(recorder, store, retention_days=30, page=50).run_pass(later),
                                       Sweeper(other, store, retention_days=30, page=50).run_pass(later))
    finally:
        await other.close()
    assert all(report.failed == 0 for report in reports)
    assert sum(report.deleted for report in reports) == 300
    assert sorted(e.object_key for e in await expiry_events(recorder)) == keys
    assert await count_objects(s3_client, store.bucket) == 0
    assert (await audit.verify(recorder))[1] == []


async def test_the_work_list_is_read_through_the_partial_indexes(recorder):
    for query, params, index in ((DUE_MEDIA, (1, 0, 0, "", 10), "music_tracks_hosted"),
                                 (DUE_TEXT, (1,), "content_kept")):
        plan = " ".join(row[3] for row in await recorder._fetch("EXPLAIN QUERY PLAN " + query, params))
        assert f"USING INDEX {index} (created_at_us>? AND created_at_us<?)" in plan or \
            f"USING INDEX {index} (created_at_us<?)" in plan, plan


async def test_a_pass_keeps_the_ledger_verified_from_checkpoint_to_checkpoint(recorder, store, s3_client, tmp_path):
    await host_tracks(recorder, s3_client, store.bucket, 2)
    later = await created_at(recorder) + 31 * DAY
    first = await Sweeper(recorder, store, retention_days=30, checkpoint_interval_s=300).run_pass(later)
    latest = await checkpoints.latest(recorder)
    assert latest is not None and (first.checkpoint, first.verified_upto) == (latest.position, latest.verified.upto)
    assert first.deleted == 2 and first.ledger_problems == [] and latest.verified.full  # the first: everything
    again = await Sweeper(recorder, store, retention_days=30, checkpoint_interval_s=300).run_pass(later)
    assert (again.checkpoint, again.verified_upto) == (None, 0)  # the last one is not 300 s old yet

    run_sql(recorder.path, "DROP TRIGGER events_are_immutable",
            ("UPDATE events SET recorded_at_us = recorded_at_us + 1 WHERE position = ?", [latest.verified.upto]))
    eager = await Sweeper(recorder, store, retention_days=30, checkpoint_interval_s=1e-6).run_pass(later)
    [(stream, version)] = await recorder._fetch("SELECT stream_id, version FROM events WHERE position = ?",
                                                (latest.verified.upto,))
    upto = latest.verified.upto
    assert eager.checkpoint is None and eager.ledger_problems[0] == (
        f"stream {stream} v{version}: no longer the event the checkpoint at {upto} verified")
    assert (await checkpoints.latest(recorder)) == latest


async def test_a_sweeper_with_a_signing_key_signs_its_checkpoints(recorder, store, s3_client):
    await host_tracks(recorder, s3_client, store.bucket, 1)
    signer = Signer.generate()
    report = await Sweeper(recorder, store, retention_days=30, checkpoint_interval_s=300, signer=signer).run_pass(
        await created_at(recorder))
    [published] = [c.published() for c in await checkpoints.newest(recorder, None, 10)]
    assert report.checkpoint == published["position"] and published["key_id"] == signer.key_id
    stated = notes.opened(published["note"], checkpoints.ORIGIN, signer.public_raw)
    assert stated.size == published["tree_size"] == report.verified_upto


async def test_a_sweeper_set_not_to_verify_records_no_checkpoint(recorder, store):
    report = await Sweeper(recorder, store, retention_days=30, checkpoint_interval_s=0).run_pass(
        datetime.now(UTC))
    assert (report.checkpoint, report.verified_upto) == (None, 0)
    assert await checkpoints.latest(recorder) is None
