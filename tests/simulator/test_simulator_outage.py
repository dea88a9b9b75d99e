"""A provider outage on demand (`simulator.outage`): every provider request fails one way until it ends."""

import asyncio
import sys
from pathlib import Path

import aiohttp
import orjson
import pytest

from tests.support import sim_records

AUTH = {"Authorization": "Bearer sk-test"}
CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
PROJECT_ROOT = Path(__file__).resolve().parents[2]


async def test_an_outage_started_and_ended_at_run_time(make_client):
    client = await make_client()
    started = await client.post("/_sim/outage", json={"status": 503, "retry_after": "2"})
    assert (await started.json())["status"] == 503
    failed = await client.post("/v1/chat/completions", json=CHAT, headers=AUTH)
    assert failed.status == 503 and failed.headers["Retry-After"] == "2"
    assert "simulated outage" in (await failed.json())["error"]["message"]
    gemini = await client.post("/v1beta/models/gemini-2.5-flash:generateContent", json={},
                               headers={"x-goog-api-key": "g-test"})
    assert gemini.status == 503  # every provider family
    assert (await (await client.get("/_sim/outage")).json())["status"] == 503
    await client.post("/_sim/outage", json={})
    assert (await client.post("/v1/chat/completions", json=CHAT, headers=AUTH)).status == 200
    assert [r["outcome"] for r in await sim_records(client)] == ["error", "error", "completed"]


async def test_an_outage_that_drops_or_hangs_sends_nothing(make_client):
    client = await make_client()
    await client.post("/_sim/outage", json={"drop": True})
    with pytest.raises(aiohttp.ClientError):
        await client.post("/v1/chat/completions", json=CHAT, headers=AUTH)
    await client.post("/_sim/outage", json={"hang": True})
    with pytest.raises(asyncio.TimeoutError):
        await client.post("/v1/chat/completions", json=CHAT, headers=AUTH, timeout=aiohttp.ClientTimeout(total=0.3))


@pytest.mark.parametrize("body", [{"status": 200}, {"status": "x"}, {"storm": True}])
async def test_a_malformed_outage_is_a_400(make_client, body):
    client = await make_client()
    response = await client.post("/_sim/outage", json=body)
    assert response.status == 400 and "invalid outage" in (await response.json())["error"]["message"]


async def test_the_cli_starts_in_an_outage():
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "simulator", "--port", "0", "--outage", "429", cwd=PROJECT_ROOT,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        ready = orjson.loads(await asyncio.wait_for(process.stdout.readline(), timeout=15))
        async with aiohttp.ClientSession() as session:
            response = await session.post(ready["url"] + "/v1/chat/completions", json=CHAT, headers=AUTH)
            assert response.status == 429
    finally:
        process.terminate()
        await process.wait()
