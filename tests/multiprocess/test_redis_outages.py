"""Rate limits when Redis fails mid-load (issue 12, finding 3): a real `gateway serve` (under
uvloop, where a reset connection raises RuntimeError rather than a RedisError) reaches Redis
through a TCP proxy the test controls. While Redis resets every connection, refuses them, or
blackholes them, every request is still answered 200 (fail open), quickly (the breaker skips
Redis after a failure instead of waiting on it each time), and charged exactly once; health
names Redis as the failed check; once Redis is back, the limits apply again by themselves.
"""

import asyncio
import sqlite3
import time
from collections import Counter
from pathlib import Path

import aiohttp
import pytest

from gateway.accounts import admin
from tests.gateway.gateway_helpers import gateway_process, run_cli_async, write_config
from ledger.backends.sqlite import SQLiteRecorder
from tests.multiprocess.outage_helpers import chat, load, outcome
from tests.support import PROVIDER_KEY, clean_env
from tests.tcp_proxy import TcpProxy, proxied_service

# Fail open means no request waits on a broken Redis for long: at most its two calls (admit and
# spend), each cut off at connect_timeout_s + timeout_s (0.45 s), plus its own work on a machine
# the full suite keeps busy (one answer took 1.5 s there). Most answers during an outage take
# milliseconds, which the `fast` check below asserts.
ANSWER_BOUND_S = 2.0
HEALTH_BOUND_S = 2.5
COOLDOWN_S = 0.5


@pytest.fixture
async def redis_proxy():
    async with proxied_service(6379, "Redis") as proxy:
        yield proxy


async def prepared_ledger(path: Path) -> tuple[dict, dict]:
    """Two organizations: one whose key is practically unlimited, one limited to 2 requests a minute."""
    recorder = SQLiteRecorder(str(path))
    await recorder.open()
    try:
        busy = await admin.create_org(recorder, "busy", "1000")
        limited = await admin.create_org(recorder, "limited", "10")
        await admin.set_key_limits(recorder, busy["key_id"], 100_000, 100_000_000)
        await admin.set_key_limits(recorder, limited["key_id"], 2, 0)
    finally:
        await recorder.close()
    return busy, limited


def serve_config(tmp_path: Path, ledger: Path, proxy: TcpProxy, sim_url: str) -> str:
    return str(write_config(tmp_path, f"""
[ledger]
url = "sqlite:///{ledger}"
[redis]
url = "redis://127.0.0.1:{proxy.port}/15"
cooldown_s = {COOLDOWN_S}
[providers.openai]
base_url = "{sim_url}/v1"
api_key = "{PROVIDER_KEY}"
"""))


async def keep_resetting(proxy: TcpProxy, stop: asyncio.Event) -> None:
    while not stop.is_set():
        proxy.reset()
        await asyncio.sleep(0.02)


async def health(session: aiohttp.ClientSession, url: str) -> tuple[int, dict, float]:
    started = time.monotonic()
    async with session.get(url + "/") as response:
        return response.status, await response.json(), time.monotonic() - started


async def outage(proxy: TcpProxy, how: str, session, url: str, seconds: float = 1.0):
    """Hold one kind of Redis failure for `seconds`: health as seen in the middle of it, and
    when the failure began and ended."""
    began, resetting = time.monotonic(), asyncio.Event()
    resetter = None
    if how == "reset":
        resetter = asyncio.create_task(keep_resetting(proxy, resetting))
    else:
        await proxy.cut(how)
    await asyncio.sleep(seconds / 2)
    probe = await health(session, url)
    await asyncio.sleep(seconds / 2)
    resetting.set()
    if resetter:
        await resetter
    await proxy.restore()
    return probe, began, time.monotonic()


def charged_request_ids(ledger: Path) -> Counter:
    from ledger.events import RequestCompleted, decode_event

    db = sqlite3.connect(ledger)
    try:
        rows = db.execute("SELECT data FROM events").fetchall()
    finally:
        db.close()
    return Counter(e.request_id for (data,) in rows if isinstance(e := decode_event(data), RequestCompleted))


async def test_redis_failing_any_way_mid_load_fails_open_fast_and_charges_once(tmp_path, redis_proxy, sim_url):
    ledger = tmp_path / "ledger.db"
    busy, limited = await prepared_ledger(ledger)
    config = serve_config(tmp_path, ledger, redis_proxy, sim_url)
    async with gateway_process("serve", "--port", "0", "--config", config, env=clean_env()) as served:
        url = await served.ready_url()
        async with aiohttp.ClientSession(url) as client, aiohttp.ClientSession() as session:
            stop = asyncio.Event()
            traffic = asyncio.create_task(load(client, busy["api_key"], stop))
            await asyncio.sleep(0.5)
            probes = {how: await outage(redis_proxy, how, session, url) for how in ("reset", "refused", "blackholed")}
            await asyncio.sleep(2 * COOLDOWN_S + 0.3)  # the breaker lets Redis back in by itself
            statuses = [(await chat(client, limited["api_key"], 2 * n + 1)).status for n in range(5)]
            healthy_again = (await health(session, url))[0]
            stop.set()
            answers = await traffic
        assert await served.stop() == 0

    assert [outcome(a) for a in answers] == ["charged"] * len(answers)  # fail open: all served, no 500
    slowest = max(answers, key=lambda a: a.seconds)
    assert slowest.seconds < ANSWER_BOUND_S, slowest
    counts = charged_request_ids(ledger)
    assert all(counts[a.request_id] == 1 for a in answers) and max(counts.values()) == 1
    _, began, ended = probes["blackholed"]
    during = [a.seconds for a in answers if began < a.started < ended]
    fast = [seconds for seconds in during if seconds < 0.1]
    assert len(fast) > 0.8 * len(during), during  # the breaker skips Redis: no wait on each request
    for how in ("refused", "blackholed"):
        (status, body, seconds), _, _ = probes[how]
        assert status == 503 and seconds < HEALTH_BOUND_S, (how, body, seconds)
        assert body["health"]["redis"]["connected"] is False and body["health"]["database"]["connected"]
    assert statuses.count(429) >= 1, statuses  # Redis counts again: the limited key is held to 2
    assert healthy_again == 200
    assert "Traceback" not in served.stderr
    verified = await run_cli_async("ledger", "verify", "--config", config)
    assert verified.returncode == 0, verified.stdout + verified.stderr
