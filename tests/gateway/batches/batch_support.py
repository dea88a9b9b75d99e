"""What the batch tests share: SDK clients at a real gateway, input files, waiting for a batch."""

import asyncio
import io
import json
import time

import aiohttp
import msgspec
import pytest

from ledger.events import RequestCompleted

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

DEADLINE_S = 60.0


def openai_sdk(gateway, org) -> "openai.AsyncOpenAI":
    return openai.AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=org["api_key"], max_retries=0)


def anthropic_sdk(gateway, org) -> "anthropic.AsyncAnthropic":
    return anthropic.AsyncAnthropic(base_url=gateway.url, api_key=org["api_key"], max_retries=0)


def chat_lines(model: str, count: int, *, text: str = "hello", extra: dict | None = None,
               url: str = "/v1/chat/completions") -> bytes:
    return b"".join(json.dumps({"custom_id": f"line-{n}", "method": "POST", "url": url, "body": {
        "model": model, "messages": [{"role": "user", "content": f"{text} {n}"}], "max_tokens": 20,
        **(extra or {})}}).encode() + b"\n" for n in range(count))


async def upload(client, data: bytes) -> str:
    return (await client.files.create(file=("input.jsonl", io.BytesIO(data)), purpose="batch")).id


async def ended(client, batch_id: str, deadline_s: float = DEADLINE_S):
    """The OpenAI batch once it reached a final status."""
    until = time.monotonic() + deadline_s
    while True:
        batch = await client.batches.retrieve(batch_id)
        if batch.status in ("completed", "failed", "expired", "cancelled"):
            return batch
        assert time.monotonic() < until, f"batch {batch_id} still {batch.status}"
        await asyncio.sleep(0.1)


async def message_batch_ended(client, batch_id: str, deadline_s: float = DEADLINE_S):
    until = time.monotonic() + deadline_s
    while True:
        batch = await client.messages.batches.retrieve(batch_id)
        if batch.processing_status == "ended":
            return batch
        assert time.monotonic() < until, f"message batch {batch_id} still {batch.processing_status}"
        await asyncio.sleep(0.1)


async def jsonl(client, file_id: str | None) -> list[dict]:
    if file_id is None:
        return []
    content = (await client.files.content(file_id)).content
    return [json.loads(line) for line in content.splitlines() if line.strip()]


async def lines_recorded(gateway, batch_id: str) -> list[RequestCompleted]:
    return [r.event for r in await gateway.events()
            if isinstance(r.event, RequestCompleted) and r.event.batch_id == batch_id]


async def pause_simulator(sim_url: str, paused: bool) -> None:
    async with aiohttp.ClientSession() as session, session.post(f"{sim_url}/_sim/batches",
                                                                json={"paused": paused}) as response:
        assert response.status == 200


async def simulator_batches(sim_url: str) -> list[dict]:
    async with aiohttp.ClientSession() as session, session.get(f"{sim_url}/_sim/batches") as response:
        return (await response.json())["data"]


async def until(read, done, deadline_s: float = DEADLINE_S):
    """What `read()` gives once `done` holds of it, polled until a deadline."""
    limit = time.monotonic() + deadline_s
    while not done(found := await read()):
        assert time.monotonic() < limit, f"still {found!r}"
        await asyncio.sleep(0.05)
    return found


def in_flight(config, lines: int):
    """`config` whose gateway-run batches have at most `lines` lines in flight."""
    return msgspec.structs.replace(config, batches=msgspec.structs.replace(config.batches, concurrency=lines))
