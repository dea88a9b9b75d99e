"""Beyond one machine, on one machine: two gateway processes (two workers each) and two
sweepers against one PostgreSQL ledger and one S3 bucket, under concurrent traffic from several
organizations. Afterwards nothing is lost or duplicated, every 200 has exactly one charge,
balances equal a replay, and every chain verifies (DESIGN §9).

Skipped locally when no PostgreSQL listens on 127.0.0.1:5432; a failure under CI=true.
"""

import asyncio
import contextlib
import signal
import sys
from collections import Counter
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import aiohttp
import pytest

from tests.gateway.gateway_helpers import (
    GatewayProcess, gateway_process, json_lines, postgres_ledger_url, replica_toml, run_cli_async, running_process,
    simulator_providers_toml, write_config,
)
from ledger.events import MediaExpired, MusicTrackRecorded, RequestCompleted
from ledger.backends.postgres import PostgresRecorder
from tests.support import auth, clean_env, count_objects, decimal_json

SWEEPER_BIN = str(Path(sys.executable).with_name("gateway-sweeper"))


@pytest.fixture
async def pg_url():
    async with postgres_ledger_url("scale") as url:
        yield url


@pytest.fixture
def scale_config(tmp_path, pg_url, sim_url, s3_server, s3_bucket) -> str:
    return str(write_config(tmp_path, f"""
{replica_toml(pg_url, s3_server, s3_bucket)}
[sweeper]
interval_s = 0.5
{simulator_providers_toml(sim_url)}"""))


async def cli_json(*args: str) -> dict:
    result = await run_cli_async(*args)
    assert result.returncode == 0, result.stderr
    return decimal_json(result.stdout.encode())


async def traffic(urls: list[str], orgs: list[dict]) -> list[tuple[int, str]]:
    """Chats (some streamed) and music from every org, spread over both gateways, all at once."""
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True),
                                     timeout=aiohttp.ClientTimeout(total=60)) as session:
        async def send(n: int, org: dict) -> tuple[int, str]:
            url, music = urls[n % len(urls)], n % 7 == 0
            body = ({"model": "tune-3-clip-preview", "prompt": f"song {n}"} if music else
                    {"model": "gpt-4o-mini", "stream": n % 2 == 0,
                     "messages": [{"role": "user", "content": f"hello {n} [sim:tokens=4]"}]})
            path = "/v1/music" if music else "/v1/chat/completions"
            async with session.post(url + path, json=body, headers=auth(org["api_key"])) as response:
                await response.read()
                return response.status, response.headers.get("X-Request-Id", "")
        return list(await asyncio.gather(*(send(n, org) for n in range(24) for org in orgs)))


def sweeper_process(config: str, as_of: datetime) -> contextlib.AbstractAsyncContextManager[GatewayProcess]:
    return running_process(SWEEPER_BIN, "--config", config, "--as-of", as_of.isoformat(), env=clean_env())


def passes(sweeper: GatewayProcess) -> int:
    return sweeper.stderr.count('"sweep_pass"')


async def passes_after(sweepers: list[GatewayProcess]) -> None:
    """Two more passes of each sweeper, so one has begun after now (over all the traffic left)."""
    for sweeper, done in [(sweeper, passes(sweeper)) for sweeper in sweepers]:
        await sweeper.wait_for_output(lambda _out, _err, s=sweeper, n=done: passes(s) >= n + 2)


async def stop(sweeper: GatewayProcess) -> str:
    """Its log, once it has stopped as asked (exit 0: after a pass, its handlers are in place)."""
    assert await sweeper.stop(signal.SIGTERM) == 0, sweeper.stderr
    return sweeper.stderr


async def test_two_replicas_and_two_sweepers_lose_and_duplicate_nothing(scale_config, pg_url, s3_client, s3_bucket):
    orgs = [await cli_json("admin", "create-org", f"org{n}", "--credits-inr", "500", "--config", scale_config)
            for n in range(3)]
    async with gateway_process("serve", "--port", "0", "--workers", "2", "--config", scale_config,
                               env=clean_env()) as first, \
            gateway_process("serve", "--port", "0", "--workers", "2", "--config", scale_config,
                            env=clean_env()) as second:
        urls = [await served.wait_for_output(lambda _out, err: next(
            (line["url"] for line in json_lines(err) if line.get("event") == "gateway_ready" and "workers" in line),
            None)) for served in (first, second)]
        # The sweepers run beside the traffic, as if 31 days had passed: every hosted track is due.
        async with sweeper_process(scale_config, datetime.now(UTC) + timedelta(days=31)) as one, \
                sweeper_process(scale_config, datetime.now(UTC) + timedelta(days=31)) as other:
            answers = await traffic(urls, orgs)
            await passes_after([one, other])
            sweeper_logs = [await stop(one), await stop(other)]
        assert await first.stop(signal.SIGTERM) == 0 and await second.stop(signal.SIGTERM) == 0

    assert [status for status, _ in answers] == [200] * len(answers)
    assert all('"sweep_pass"' in log for log in sweeper_logs)
    recorder = PostgresRecorder.from_url(pg_url)
    await recorder.open(migrate=False)
    try:
        events = await recorder.read(0, 100_000)
        requests = [r.event for r in events if isinstance(r.event, RequestCompleted)]
        counts = Counter(e.request_id for e in requests)
        assert all(counts[request_id] == 1 for _, request_id in answers)  # one charge per 200
        assert len(counts) == len(requests) == len(answers)  # nothing else, nothing twice
        assert all(e.status == 200 and e.charged_inr_nano > 0 for e in requests)
        hosted = [r.event.request_id for r in events if isinstance(r.event, MusicTrackRecorded)]
        expired = Counter(r.event.request_id for r in events if isinstance(r.event, MediaExpired))
        assert sorted(expired) == sorted(hosted) and set(expired.values()) == {1}
        for org in orgs:
            charged = sum(r.event.charged_inr_nano for r in events
                          if isinstance(r.event, RequestCompleted) and r.stream_id == org["org_id"])
            [(credits, spent, held)] = await recorder._fetch(
                "SELECT credits_inr_nano, spent_inr_nano, held_inr_nano FROM orgs WHERE org_id = ?", (org["org_id"],))
            assert (spent, held) == (charged, 0) and credits == 500 * 10**9
    finally:
        await recorder.close()
    assert await count_objects(s3_client, s3_bucket) == 0
    for action in ("verify", "replay", "verify"):
        result = await run_cli_async("ledger", action, "--config", scale_config)
        assert result.returncode == 0, result.stdout + result.stderr



async def test_two_replicas_racing_one_org_never_overspend_its_holds(scale_config, pg_url):
    exactly_three = str(Decimal("0.05") * 84 * 3)  # three clip generations at the default rate
    org = await cli_json("admin", "create-org", "racer", "--credits-inr", exactly_three, "--config", scale_config)
    async with gateway_process("serve", "--port", "0", "--config", scale_config, env=clean_env()) as first, \
            gateway_process("serve", "--port", "0", "--config", scale_config, env=clean_env()) as second:
        urls = [await first.ready_url(), await second.ready_url()]
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
            async def generate(n: int) -> int:
                async with session.post(f"{urls[n % 2]}/v1/music", headers=auth(org["api_key"]),
                                        json={"model": "tune-3-clip-preview", "prompt": f"race {n}"}) as response:
                    await response.read()
                    return response.status
            statuses = await asyncio.gather(*(generate(n) for n in range(10)))
        assert await first.stop(signal.SIGTERM) == 0 and await second.stop(signal.SIGTERM) == 0
    assert sorted(statuses) == [200] * 3 + [402] * 7
    balance = await cli_json("admin", "balance", org["org_id"], "--config", scale_config)
    assert balance["balance_inr"] == 0
