"""GET /metrics: Prometheus text with requests, latency, upstream latency, tokens, cost, the
ledger writer and retention, summed across workers."""

import asyncio
import signal

import aiohttp

from ledger import audit
from tests.gateway.gateway_helpers import clean_env, gateway_process, json_lines, run_cli_async
from tests.support import PROVIDER_KEY, auth, chat_body, request_events, samples, value


async def test_metrics_count_requests_tokens_cost_and_ledger_commits(gateway, org):
    for stream in (False, True, False):
        response = await gateway.client.post("/v1/chat/completions", json=chat_body("hi [sim:tokens=5]", stream=stream),
                                             headers=auth(org["api_key"]))
        await response.read()
    await gateway.client.get("/v1/models")
    response = await gateway.client.get("/metrics")
    assert response.status == 200 and response.headers["Content-Type"].startswith("text/plain; version=")
    found = samples(await response.text())
    chat = {"route": "/v1/chat/completions", "model": "gpt-4o-mini", "provider": "openai", "status": "200"}
    assert value(found, "gateway_requests_total", **chat) == 3
    assert value(found, "gateway_request_seconds_count", **chat) == 3
    assert value(found, "gateway_requests_total", route="/v1/models", status="200") == 1
    assert value(found, "gateway_upstream_seconds_count", provider="openai", status="200") == 3
    assert value(found, "gateway_tokens_total", model="gpt-4o-mini", kind="completion") == 15
    charged = sum(e.charged_inr_nano for e in await request_events(gateway)) / 10**9
    assert abs(value(found, "gateway_cost_inr_total", model="gpt-4o-mini") - charged) < 1e-9
    # At low load a commit per charge, one for the first request's own hold, one for the escrow slice
    # its demand takes (the next requests are admitted from it, in memory), at most one per hold.
    commits = value(found, "gateway_ledger_batch_size_count")
    assert 3 < commits <= 6 and value(found, "gateway_ledger_commit_seconds_count") == commits
    assert value(found, "gateway_escrow_slices_total", event="taken") == 1
    assert ("gateway_media_due", ()) in found and ("gateway_media_expired", ()) in found


async def test_upstream_latency_is_reported_per_provider_and_status_refusals_and_realtime_included(gateway, org):
    """Timed around each upstream call (no aiohttp request tracing): every provider, a refusal
    with the provider's own status, and a realtime handshake (101)."""
    bodies = [chat_body("hi"), chat_body("no [sim:status=429]"),
              {**chat_body("hi"), "model": "claude-haiku-4-5", "max_tokens": 5},
              {**chat_body("hi"), "model": "gemini-2.5-flash"}]
    for body in bodies:
        async with gateway.client.post("/v1/chat/completions", json=body, headers=auth(org["api_key"])) as response:
            await response.read()
    ws = await gateway.client.ws_connect("/v1/realtime?model=gpt-4o-realtime-preview", headers=auth(org["api_key"]))
    await ws.receive()
    await ws.close()
    found = samples(await (await gateway.client.get("/metrics")).text())
    for provider, status in (("openai", "200"), ("openai", "429"), ("anthropic", "200"), ("google", "200"),
                             ("openai", "101")):
        assert value(found, "gateway_upstream_seconds_count", provider=provider, status=status) == 1, (provider, status)
    assert value(found, "gateway_upstream_seconds_sum") > 0


async def test_with_workers_any_scrape_sums_every_worker(sim_url, tmp_path):
    config = tmp_path / "gateway.toml"
    config.write_text(f'[ledger]\nurl = "sqlite:///{tmp_path}/ledger.db"\n[providers.openai]\n'
                      f'base_url = "{sim_url}/v1"\napi_key = "{PROVIDER_KEY}"\n')
    created = await run_cli_async("admin", "create-org", "acme", "--credits-inr", "100", "--config", str(config))
    key = json_lines(created.stdout)[0]["api_key"]
    async with gateway_process("serve", "--port", "0", "--workers", "2", "--config", str(config),
                               env=clean_env()) as served:
        url = await served.wait_for_output(lambda _out, err: next(
            (line["url"] for line in json_lines(err)
             if line.get("event") == "gateway_ready" and "workers" in line), None))
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as session:
            async def chat() -> int:
                async with session.post(f"{url}/v1/chat/completions", json=chat_body(), headers=auth(key)) as r:
                    await r.read()
                    return r.status
            assert await asyncio.gather(*(chat() for _ in range(30))) == [200] * 30
            for _ in range(6):  # whichever worker answers, it reports all thirty
                async with session.get(f"{url}/metrics") as response:
                    found = samples(await response.text())
                assert value(found, "gateway_requests_total", route="/v1/chat/completions", status="200") == 30
        workers = {line["worker"] for line in json_lines(served.stderr) if line.get("event") == "request"}
        assert await served.stop(signal.SIGTERM) == 0
    assert len(workers) == 2


async def test_metrics_show_the_last_verified_position_and_its_age(gateway, org):
    found = samples(await (await gateway.client.get("/metrics")).text())
    assert value(found, "gateway_ledger_verified_position") == 0  # never verified: no age either
    assert ("gateway_ledger_verified_age_seconds", ()) not in found
    verified, at = await audit.keep_verified(gateway.ledger.recorder)
    assert verified.problems == [] and at is not None
    found = samples(await (await gateway.client.get("/metrics")).text())
    assert value(found, "gateway_ledger_verified_position") == verified.upto
    assert 0 <= value(found, "gateway_ledger_verified_age_seconds") < 60
