"""Helpers shared by test modules (`from tests.support import ...`)."""

import asyncio
import contextlib
import hashlib
import tempfile
import json
import os
import subprocess
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any
import socket
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING

import aiohttp
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

if TYPE_CHECKING:
    from gateway.config import Config, ProviderConfig
    from ledger.signing import Signer

PROVIDER_KEY = "sk-sim-provider-secret-0123456789"


def service_account_file(sim_url: str) -> str:
    """A service account file whose tokens come from the simulator at `sim_url` (one per
    simulator, in the temp dir: what google-auth reads from GOOGLE_APPLICATION_CREDENTIALS)."""
    from simulator.cloud_credentials import service_account_info
    path = Path(tempfile.gettempdir()) / f"gateway-test-sa-{hashlib.sha256(sim_url.encode()).hexdigest()[:16]}.json"
    if not path.exists():
        staged = path.with_suffix(f".{uuid.uuid4().hex}")
        staged.write_text(json.dumps(service_account_info(f"{sim_url}/token")))
        staged.replace(path)  # whole or not at all: tests in other processes may read it at once
    return str(path)


def cloud_provider(protocol: str, sim_url: str, **options: Any) -> "ProviderConfig":
    """A provider of `protocol` served by the simulator at `sim_url`, with the credentials it
    checks: a bearer key (openai, anthropic, google, bedrock), a service account (vertex), Azure's
    api-key (azure, the v1 API)."""
    from gateway.config import ProviderConfig
    from simulator.cloud_credentials import AZURE_API_KEY, GOOGLE_PROJECT
    match protocol:
        case "openai":
            return ProviderConfig(protocol="openai", base_url=f"{sim_url}/v1", api_key=PROVIDER_KEY, **options)
        case "vertex":
            return ProviderConfig(protocol="vertex", base_url=sim_url, project=GOOGLE_PROJECT, region="us-east5",
                                  credentials_file=service_account_file(sim_url), **options)
        case "azure":
            return ProviderConfig(protocol="azure", base_url=f"{sim_url}/openai/v1", api_key=AZURE_API_KEY,
                                  **options)
        case _:
            return ProviderConfig(protocol=protocol, base_url=sim_url, api_key=PROVIDER_KEY, **options)


def single_attempt(config: Any) -> Any:
    """`config` whose requests try one provider only: a test of one provider's failure sees that
    failure, not another provider of the same model answering in its place (the clouds serve
    the shipped GPT, Claude and Gemini models too)."""
    import msgspec
    return msgspec.structs.replace(config, routing=msgspec.structs.replace(config.routing, max_attempts=1))


def postgres_url(port: int = 5432, schema: str = "") -> str:
    """The test database as user postgres (trust auth, as on the CI machine) on 127.0.0.1:`port`
    (a proxy's port, or a closed one), with `?schema=` when `schema` is given. The database is
    `test`, or $TEST_POSTGRES_DATABASE: runs sharing one server each need their own, since the
    ledger's append lock is one per database (a run's stuck COMMIT would hold up the other's)."""
    database = os.environ.get("TEST_POSTGRES_DATABASE", "test")
    return f"postgresql://postgres@127.0.0.1:{port}/{database}" + (f"?schema={schema}" if schema else "")


POSTGRES_DSN = postgres_url()
IN_CI = os.environ.get("CI", "").lower() == "true"
# Variables of the environment that would change what a gateway or sweeper under test does.
_PROVIDER_SECRETS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "AWS_ACCESS_KEY_ID",
                     "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_BEARER_TOKEN_BEDROCK",
                     "GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_PROJECT", "AZURE_OPENAI_API_KEY",
                     "AZURE_OPENAI_BASE_URL")


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without GATEWAY_* or provider keys, plus `extra`."""
    env = {name: value for name, value in os.environ.items()
           if not name.startswith("GATEWAY_") and name not in _PROVIDER_SECRETS}
    env.update(extra)
    return env


def need_service(host: str, port: int, name: str) -> None:
    """Skip (locally) or fail (in CI) when a service the test needs is not listening."""
    try:
        socket.create_connection((host, port), timeout=1).close()
    except OSError as exc:
        message = f"{name} is not reachable at {host}:{port}: {exc}"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)


@contextlib.asynccontextmanager
async def postgres_schema(prefix: str) -> AsyncIterator[str]:
    """The name of a fresh schema in the test database, dropped afterwards (skips locally, fails
    under CI=true, when PostgreSQL is not listening)."""
    need_service("127.0.0.1", 5432, "PostgreSQL")
    import asyncpg

    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    try:
        yield name
    finally:
        db = await asyncpg.connect(POSTGRES_DSN)
        await db.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
        await db.close()


def decimal_json(body: bytes) -> dict:
    """Parse JSON keeping every number exact (money must never pass through a float)."""
    return json.loads(body, parse_float=Decimal)


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def chat_body(text: str = "hello there", **extra) -> dict:
    return {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": text}], **extra}


async def sse_lines(response: aiohttp.ClientResponse) -> list[bytes]:
    return [line.removeprefix(b"data: ") async for line in response.content
            if line.startswith(b"data: ") for line in [line.rstrip(b"\n")]]


# Dummy S3 credentials handed to clients explicitly, so nothing reads the environment or ~/.aws.
S3_CREDENTIALS = {"region": "us-east-1", "access_key_id": "testing-access-key-id",
                  "secret_access_key": "testing-secret-access-key"}


async def put_many(client, bucket: str, keys: list[str]) -> None:
    """Store an object under each key, a few at a time (the client pools 10 connections)."""
    gate = asyncio.Semaphore(10)

    async def put(key: str) -> None:
        async with gate:
            await client.put_object(Bucket=bucket, Key=key, Body=key.encode())
    await asyncio.gather(*(put(key) for key in keys))


async def count_objects(client, bucket: str) -> int:
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket)
    return sum([page.get("KeyCount", 0) async for page in pages])


async def upstream_requests(gateway, simulator) -> list[dict]:
    """What the simulator received, oldest first (its GET /_sim/requests record)."""
    return (await (await gateway.client.session.get(simulator.make_url("/_sim/requests"))).json())["data"]


async def request_events(gateway) -> list:
    """The RequestCompleted events in the gateway's ledger, in order."""
    from ledger.events import RequestCompleted

    return [r.event for r in await gateway.events() if isinstance(r.event, RequestCompleted)]


async def post_chat(gateway, org: dict, body: dict):
    return await gateway.client.post("/v1/chat/completions", json=body, headers=auth(org["api_key"]))


async def poll(probe, accept=bool, timeout: float = 30.0):
    """`probe()`'s value once `accept` takes it, or its last value when `timeout` runs out (a
    generous deadline: a loaded machine is slow, not wrong, and a met condition ends the wait)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = await probe()
        if accept(value) or asyncio.get_running_loop().time() > deadline:
            return value
        await asyncio.sleep(0.05)


# -- processes -----------------------------------------------------------------------------------

async def process_result(proc: asyncio.subprocess.Process, timeout: float, args: Any = ()
                         ) -> subprocess.CompletedProcess:
    """`proc`'s exit code and decoded output once it exits. Killed (and reaped) if it outlives
    `timeout` (TimeoutError) or its caller, so no test leaves a process running."""
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    return subprocess.CompletedProcess(args, proc.returncode, out.decode(), err.decode())


async def run_process(*command: str, timeout: float, **options: Any) -> subprocess.CompletedProcess:
    """`command` to completion without blocking the event loop, as `process_result`."""
    proc = await asyncio.create_subprocess_exec(*command, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE, **options)
    return await process_result(proc, timeout, list(command))


# -- the simulator's request record, WebSocket events, multipart forms ---------------------------

async def sim_records(client) -> list[dict[str, Any]]:
    """The simulator's record of the requests it received, oldest first."""
    return (await (await client.get("/_sim/requests")).json())["data"]


async def wait_for_outcome(client, seq: int, outcome: str, timeout: float = 30.0) -> dict[str, Any]:
    """Record `seq` once it has settled with `outcome` (asserted when `timeout` runs out)."""
    deadline = time.monotonic() + timeout
    while True:
        record = next(r for r in await sim_records(client) if r["seq"] == seq)
        if record["outcome"] == outcome or time.monotonic() > deadline:
            assert record["outcome"] == outcome
            return record
        await asyncio.sleep(0.02)


async def ws_receive(ws) -> dict[str, Any]:
    message = await ws.receive()
    assert message.type is aiohttp.WSMsgType.TEXT, message
    return orjson.loads(message.data)


async def ws_until(ws, event_type: str) -> list[dict[str, Any]]:
    """Every event up to and including the first of `event_type`."""
    events = [await ws_receive(ws)]
    while events[-1]["type"] != event_type:
        events.append(await ws_receive(ws))
    return events


def transcription_form(audio: bytes, *, file_first: bool = False, model: str = "whisper-1",
                       **fields: str) -> aiohttp.FormData:
    """A transcription upload: `model` and `fields` before the file, or the file first."""
    data = aiohttp.FormData()
    if file_first:
        data.add_field("file", audio, filename="talk.mp3", content_type="audio/mpeg")
    data.add_field("model", model)
    for name, value in fields.items():
        data.add_field(name, value)
    if not file_first:
        data.add_field("file", audio, filename="talk.mp3", content_type="audio/mpeg")
    return data


# -- /metrics ------------------------------------------------------------------------------------

def samples(text: str) -> dict[tuple[str, tuple], float]:
    """Every sample of a Prometheus text, by name and sorted labels."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(found: dict, name: str, **labels) -> float:
    """The sum of the `samples` named `name` whose labels include `labels`."""
    return sum(v for (n, ls), v in found.items() if n == name and set(labels.items()) <= set(ls))


def signing_checkpoints(config: "Config", signer: "Signer", tmp_path: Path, **ledger: Any) -> "Config":
    """`config` whose gateway signs a tree head every 0.2 s with `signer`'s key (kept in `tmp_path`),
    with any other `[ledger]` fields given."""
    import msgspec

    key_file = tmp_path / "signing.pem"
    key_file.write_bytes(signer.private_pem())
    settings = msgspec.structs.replace(config.ledger, signing_key=str(key_file), checkpoint_interval_s=0.2, **ledger)
    return msgspec.structs.replace(config, ledger=settings)
