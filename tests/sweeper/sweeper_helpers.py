"""Helpers for the sweeper tests: hosted tracks put straight into a ledger and a bucket, and
the real `gateway-sweeper` command in subprocesses (each killed if it outlives its test)."""

import asyncio
import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from ledger.events import MediaExpired, MusicTrackRecorded, OrgCreated
from ledger.recorder import Append, Recorder
from tests.support import S3_CREDENTIALS, clean_env, process_result, put_many

SWEEPER_BIN = str(Path(sys.executable).with_name("gateway-sweeper"))
RUN_TIMEOUT_S = 60.0
DAY = timedelta(days=1)


async def host_tracks(recorder: Recorder, s3_client, bucket: str, count: int, org: str = "acme",
                      first: int = 0) -> list[str]:
    """`count` hosted tracks of `org`: their objects in the bucket and their events in the ledger."""
    if not await recorder.read_stream(org):
        await recorder.append([Append(org, [OrgCreated(name=org)])])
    keys = [f"{org}/req_{org}_{n:05}.mp3" for n in range(first, first + count)]
    await put_many(s3_client, bucket, keys)
    events = [MusicTrackRecorded(request_id=key.rpartition("/")[2][:-4], model="tune-3-clip-preview",
                                 provider="google", storage="s3", object_key=key, size=len(key))
              for key in keys]
    [outcome] = await recorder.append([Append(org, events)])
    assert not isinstance(outcome, Exception), outcome
    return keys


async def expiry_events(recorder: Recorder) -> list[MediaExpired]:
    return [r.event for r in await recorder.read(0, 1_000_000) if isinstance(r.event, MediaExpired)]


async def created_at(recorder: Recorder) -> datetime:
    """When the newest track was recorded, as an aware datetime."""
    [(us,)] = await recorder._fetch("SELECT MAX(created_at_us) FROM music_tracks")
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=us)


def sweeper_toml(ledger_url: str, s3_server: str, bucket: str, extra: str = "") -> str:
    """A config file as an operator writes it: the gateway's sections included."""
    return (f'[server]\nport = 9999\n[ledger]\nurl = "{ledger_url}"\n'
            f'[storage]\ns3_endpoint_url = "{s3_server}"\ns3_bucket = "{bucket}"\n'
            f's3_access_key_id = "{S3_CREDENTIALS["access_key_id"]}"\n'
            f's3_secret_access_key = "env:TEST_S3_SECRET"\nsigning_secret = "gateway-only"\n{extra}')


def sweeper_env() -> dict[str, str]:
    return clean_env(TEST_S3_SECRET=S3_CREDENTIALS["secret_access_key"])


async def start_sweeper(config: Path, *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        SWEEPER_BIN, "--config", str(config), *args, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env=sweeper_env())


async def finish(proc: asyncio.subprocess.Process, timeout: float = RUN_TIMEOUT_S) -> subprocess.CompletedProcess:
    return await process_result(proc, timeout, SWEEPER_BIN)


async def run_sweeper(config: Path, *args: str) -> subprocess.CompletedProcess:
    """`gateway-sweeper --config CONFIG ARGS...` to completion, without blocking the loop."""
    return await finish(await start_sweeper(config, *args))


def pass_lines(stderr: str) -> list[dict]:
    """The `sweep_pass` log lines a sweeper wrote."""
    return [line for line in map(json.loads, stderr.splitlines()) if line.get("event") == "sweep_pass"]


def as_of(moment: datetime) -> str:
    return moment.isoformat()
