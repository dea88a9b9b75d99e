"""The `gateway-sweeper` process, as an operator runs it beside a gateway: real sockets, a
real SQLite file, the S3 API server, and kill -9 where a crash is the point."""

import asyncio
import json
import signal
import sqlite3
import subprocess
import sys
import textwrap

import pytest

from ledger import audit
from ledger.backends.sqlite import path_of
from tests.support import auth, count_objects
from tests.sweeper.sweeper_helpers import (
    DAY, as_of, created_at, expiry_events, finish, host_tracks, pass_lines, run_sweeper, start_sweeper,
    sweeper_env, sweeper_toml,
)


@pytest.fixture
def config_file(tmp_path, s3_server, s3_bucket, ledger_url):
    def write(extra: str = "", url: str | None = None, bucket: str | None = None):
        path = tmp_path / "gateway.toml"
        path.write_text(sweeper_toml(url or ledger_url, s3_server, bucket or s3_bucket, extra))
        return path
    return write


async def generate(gateway, key: str, prompt: str, **extra) -> dict:
    response = await gateway.client.post("/v1/music", headers=auth(key), json={
        "model": "tune-3-clip-preview", "prompt": prompt, **extra})
    assert response.status == 200, await response.text()
    return await response.json()


async def history(gateway, key: str) -> dict[str, dict]:
    body = await (await gateway.client.get("/v1/music", headers=auth(key))).json()
    return {item["id"]: item for item in body["data"]}


async def test_29_days_later_nothing_31_days_later_expired_with_prompts_kept(
        hosted, hosted_org, s3_client, s3_bucket, s3_config, config_file):
    key = hosted_org["api_key"]
    tracks = [await generate(hosted, key, f"song {n}", lyrics=f"[Verse] line {n}") for n in range(2)]
    signed = (await hosted.client.get(f"/v1/music/{tracks[0]['id']}/content", headers=auth(key),
                                      allow_redirects=False)).headers["Location"]
    config = config_file(url=s3_config.ledger.url)
    created = await created_at(hosted.ledger.recorder)

    early = await run_sweeper(config, "--once", "--as-of", as_of(created + 29 * DAY))
    assert early.returncode == 0, early.stderr
    assert pass_lines(early.stderr)[0]["due"] == 0 and await count_objects(s3_client, s3_bucket) == 2

    swept = await run_sweeper(config, "--once", "--as-of", as_of(created + 31 * DAY))
    assert swept.returncode == 0, swept.stderr
    [line] = pass_lines(swept.stderr)
    assert {k: line[k] for k in ("due", "deleted", "failed", "retried")} == {
        "due": 2, "deleted": 2, "failed": 0, "retried": 0}
    assert line["level"] == "info" and isinstance(line["duration_ms"], int)
    assert await count_objects(s3_client, s3_bucket) == 0

    items = await history(hosted, key)
    for n, track in enumerate(tracks):
        item = items[track["id"]]
        assert item["audio"] is None and item["expired"] is True
        assert item["prompt"] == f"song {n}" and item["text"] == track["text"]
        content = await hosted.client.get(f"/v1/music/{track['id']}/content", headers=auth(key))
        assert content.status == 410
    assert (await hosted.client.get(signed)).status == 410  # a link handed out earlier stops working

    again = await run_sweeper(config, "--once", "--as-of", as_of(created + 31 * DAY))
    assert (pass_lines(again.stderr)[0]["due"], pass_lines(again.stderr)[0]["deleted"]) == (0, 0)
    assert len(await expiry_events(hosted.ledger.recorder)) == 2
    assert (await audit.verify(hosted.ledger.recorder))[1] == []


async def test_text_removal_keeps_media_and_media_removal_keeps_text(
        hosted, hosted_org, s3_client, s3_bucket, s3_config, config_file):
    key = hosted_org["api_key"]
    track = await generate(hosted, key, "a secret prompt", lyrics="[Chorus] private words")
    chat = await hosted.client.post("/v1/chat/completions", headers=auth(key), json={
        "model": "gpt-4o-mini", "messages": [{"role": "user", "content": "private chat"}]})
    assert chat.status == 200
    config = config_file("[retention]\ntext_days = 7\n", url=s3_config.ledger.url)
    created = await created_at(hosted.ledger.recorder)

    dry = await run_sweeper(config, "--once", "--dry-run", "--as-of", as_of(created + 8 * DAY))
    assert pass_lines(dry.stderr)[0]["text_due"] == 3 and pass_lines(dry.stderr)[0]["text_removed"] == 0
    result = await run_sweeper(config, "--once", "--as-of", as_of(created + 8 * DAY))
    assert result.returncode == 0, result.stderr
    assert pass_lines(result.stderr)[0]["text_removed"] == 3  # prompt, lyrics, chat text

    item = (await history(hosted, key))[track["id"]]
    assert item["text_removed"] is True and item["prompt"] == "" and item["text"] == ""
    assert item["expired"] is False and item["audio"]["storage"] == "s3"
    download = await hosted.client.get(f"/v1/music/{track['id']}/content", headers=auth(key))
    assert download.status == 200 and await count_objects(s3_client, s3_bucket) == 1
    stored = await hosted.ledger.recorder._fetch("SELECT COUNT(*) FROM content WHERE body IS NOT NULL")
    assert stored == [(0,)]
    assert (await audit.verify(hosted.ledger.recorder))[1] == []


async def test_once_exits_non_zero_when_a_delete_failed(recorder, store, s3_client, config_file):
    await host_tracks(recorder, s3_client, store.bucket, 2)
    await s3_client.put_bucket_policy(Bucket=store.bucket, Policy=(
        '{"Version": "2012-10-17", "Statement": [{"Effect": "Deny", "Principal": "*",'
        f' "Action": "s3:DeleteObject", "Resource": "arn:aws:s3:::{store.bucket}/*"}}]}}'))
    later = as_of(await created_at(recorder) + 31 * DAY)

    failed = await run_sweeper(config_file(), "--once", "--as-of", later)
    assert failed.returncode == 1
    [line] = pass_lines(failed.stderr)
    assert line["level"] == "warning" and line["failed"] == 2 and line["deleted"] == 0
    assert all("AccessDenied" in why for why in line["failures"].values())

    await s3_client.delete_bucket_policy(Bucket=store.bucket)
    assert (await run_sweeper(config_file(), "--once", "--as-of", later)).returncode == 0
    assert len(await expiry_events(recorder)) == 2


async def test_a_crash_between_delete_and_mark_is_completed_by_the_next_pass(
        recorder, store, s3_client, config_file, ledger_url):
    await host_tracks(recorder, s3_client, store.bucket, 50)
    later = as_of(await created_at(recorder) + 31 * DAY)
    # Hold the ledger's write lock: the sweeper deletes, then waits to mark; kill -9 it there.
    blocker = sqlite3.connect(path_of(ledger_url), isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        proc = await start_sweeper(config_file(), "--once", "--as-of", later)
        await wait_for(lambda: count_objects(s3_client, store.bucket), 0)
        proc.send_signal(signal.SIGKILL)
        assert (await finish(proc)).returncode == -signal.SIGKILL
    finally:
        blocker.rollback()
        blocker.close()
    assert await expiry_events(recorder) == []  # deleted, not marked: still on the work list

    completed = await run_sweeper(config_file(), "--once", "--as-of", later)
    assert completed.returncode == 0, completed.stderr
    assert pass_lines(completed.stderr)[0]["deleted"] == 50
    final = await run_sweeper(config_file(), "--once", "--as-of", later)
    assert pass_lines(final.stderr)[0]["due"] == 0
    assert len(await expiry_events(recorder)) == 50 and (await audit.verify(recorder))[1] == []


async def test_two_sweeper_processes_racing_never_double_mark_nor_fail(
        recorder, store, s3_client, config_file, ledger_url):
    keys = await host_tracks(recorder, s3_client, store.bucket, 400)
    later = as_of(await created_at(recorder) + 31 * DAY)
    blocker = sqlite3.connect(path_of(ledger_url), isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # both delete everything, then both mark the same tracks
    try:
        procs = [await start_sweeper(config_file(), "--once", "--as-of", later) for _ in range(2)]
        await wait_for(lambda: count_objects(s3_client, store.bucket), 0)
        await asyncio.sleep(1.0)
    finally:
        blocker.rollback()
        blocker.close()
    results = [await finish(proc) for proc in procs]
    assert [r.returncode for r in results] == [0, 0], [r.stderr for r in results]
    lines = [pass_lines(r.stderr)[0] for r in results]
    assert sum(line["deleted"] for line in lines) == 400 and all(line["failed"] == 0 for line in lines)
    assert sorted(e.object_key for e in await expiry_events(recorder)) == keys
    assert (await audit.verify(recorder))[1] == []


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
async def test_the_loop_sweeps_then_stops_cleanly_on_a_signal(recorder, store, s3_client, config_file, signum):
    await host_tracks(recorder, s3_client, store.bucket, 3)
    later = as_of(await created_at(recorder) + 31 * DAY)
    proc = await start_sweeper(config_file("[sweeper]\ninterval_s = 3600\n"), "--as-of", later)
    await wait_for(lambda: count_of_events(recorder), 3)
    proc.send_signal(signum)
    result = await finish(proc, timeout=15)
    assert result.returncode == 0, result.stderr
    assert pass_lines(result.stderr)[0]["deleted"] == 3 and '"sweeper_stopped"' in result.stderr


# The sweeper's own entry point, then lines from the standard library's loggers as the ledger and
# storage write them (the sweeper's code paths log nothing there unless something goes wrong).
WITH_LIBRARY_LINES = textwrap.dedent("""
    import logging, sys
    from sweeper.cli import main
    status = main(sys.argv[1:])
    logging.getLogger("ledger.writer").warning("ledger commits fail, each caller is told: %s", "outage")
    try:
        raise OSError("disk gone")
    except OSError:
        logging.getLogger("storage.serving").exception("aborted the response")
    logging.getLogger("ledger.follower").debug("below the level: not written")
    sys.exit(status)
""")


async def test_every_stderr_line_is_json_the_standard_library_loggers_too(recorder, store, s3_client, config_file):
    await host_tracks(recorder, s3_client, store.bucket, 2)
    later = as_of(await created_at(recorder) + 31 * DAY)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", WITH_LIBRARY_LINES, "--config", str(config_file()), "--once", "--as-of", later,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=sweeper_env())
    result = await finish(proc)
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stderr.splitlines()]  # raises on a line that is not JSON
    assert [line["deleted"] for line in lines if line["event"] == "sweep_pass"] == [2]
    library = {line["logger"]: line for line in lines if "logger" in line}
    assert {"ledger.writer", "storage.serving"} <= library.keys() and "ledger.follower" not in library
    writer, serving = library["ledger.writer"], library["storage.serving"]
    assert (writer["event"], writer["level"]) == ("ledger commits fail, each caller is told: outage", "warning")
    assert (serving["event"], serving["level"]) == ("aborted the response", "error")
    assert serving["exception"].startswith("Traceback") and serving["exception"].endswith("OSError: disk gone")
    assert all(line["timestamp"].endswith("Z") for line in (writer, serving))


async def test_a_missing_bucket_is_an_error_and_is_not_created(recorder, config_file, s3_client):
    result = await run_sweeper(config_file(bucket="no-such-bucket-here"), "--once")
    assert result.returncode == 1 and "no-such-bucket-here" in result.stderr
    assert "no-such-bucket-here" not in {b["Name"] for b in (await s3_client.list_buckets())["Buckets"]}


async def test_a_bad_setting_is_exit_2_naming_the_key(config_file):
    result = await run_sweeper(config_file("[retention]\ntext_days = -1\n"), "--once")
    assert result.returncode == 2 and "text_days" in result.stderr


def test_a_signing_key_that_cannot_be_read_is_exit_2_naming_it(tmp_path):
    config = tmp_path / "gateway.toml"
    config.write_text(f'[ledger]\nurl = "sqlite:///{tmp_path}/ledger.db"\nsigning_key = "{tmp_path}/none.pem"\n')
    result = subprocess.run([sys.executable, "-m", "sweeper", "--once", "--config", str(config)],
                            capture_output=True, text=True, timeout=30, env=sweeper_env())
    assert result.returncode == 2 and "signing_key" in result.stderr and "none.pem" in result.stderr


def test_as_of_must_be_an_iso_instant(config_file):
    result = subprocess.run([sys.executable, "-m", "sweeper", "--once", "--as-of", "yesterday"],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 2 and "ISO 8601" in result.stderr


def test_the_sweeper_imports_nothing_from_the_gateway():
    code = ("import sys, sweeper.cli, sweeper.runner, sweeper.sweep, sweeper.settings;"
            " print(sorted(m for m in sys.modules if m.split('.')[0] in ('gateway', 'simulator')))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert result.stdout.strip() == "[]", result.stderr


async def count_of_events(recorder) -> int:
    return len(await expiry_events(recorder))


async def wait_for(probe, expected, timeout: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while (value := await probe()) != expected:
        assert asyncio.get_running_loop().time() < deadline, f"still {value}, waiting for {expected}"
        await asyncio.sleep(0.05)


def test_instants_without_a_zone_are_utc():
    from sweeper.cli import instant
    assert instant("2026-01-31T00:00:00") == instant("2026-01-31T00:00:00+00:00")
    assert instant("2026-01-31T05:30:00+05:30") == instant("2026-01-31T00:00:00Z")
