"""Batches across a SIGKILL (issue 39), on SQLite and on PostgreSQL, with real `gateway serve`
processes: a gateway killed mid-batch leaves the batch to the next one, which runs only the lines
not yet recorded; every custom_id is then in the output (or error) file once, each line is
recorded and charged once, and the ledger verifies. A native batch is sent upstream once."""

import io
import json
import os
import signal

import openai

from gateway.accounts import admin
from ledger import batch_queries
from tests.gateway.batches.batch_support import chat_lines, ended, pause_simulator, simulator_batches, until
from tests.gateway.gateway_helpers import gateway_process, run_cli_async, simulator_providers_toml, write_config
from tests.multiprocess.test_webhooks_kill9 import on_ledger
from tests.support import clean_env

LINES = 60


def config_file(tmp_path, ledger_url: str, sim_url: str) -> str:
    return str(write_config(tmp_path, f"""
[ledger]
url = "{ledger_url}"
[batches]
concurrency = 4
poll_interval_s = 0.2
files_path = "{tmp_path}/files"
{simulator_providers_toml(sim_url)}
"""))


async def recorded_lines(ledger_url: str, batch_id: str) -> set[str]:
    return await on_ledger(ledger_url, lambda r: batch_queries.recorded(r, batch_id))


async def batch_row(ledger_url: str, org_id: str, batch_id: str):
    return await on_ledger(ledger_url, lambda r: batch_queries.batch(r, org_id, batch_id))


async def charges_per_line(ledger_url: str, batch_id: str) -> list[int]:
    rows = await on_ledger(ledger_url, lambda r: r._fetch(
        "SELECT count(*) FROM request_log WHERE batch_id = ? GROUP BY custom_id", (batch_id,)))
    return [count for (count,) in rows]


async def test_a_gateway_run_batch_survives_a_kill_9(ledger_url, tmp_path, sim_url):
    org = await on_ledger(ledger_url, lambda r: admin.create_org(r, "batches", "100"))
    config = config_file(tmp_path, ledger_url, sim_url)
    async with gateway_process("serve", "--port", "0", "--config", config, env=clean_env()) as served:
        client = openai.AsyncOpenAI(base_url=f"{await served.ready_url()}/v1", api_key=org["api_key"], max_retries=0)
        data = chat_lines("gemini-2.5-flash", LINES, text="[sim:latency_ms=150] slow")
        file_id = (await client.files.create(file=("in.jsonl", io.BytesIO(data)), purpose="batch")).id
        batch = await client.batches.create(input_file_id=file_id, endpoint="/v1/chat/completions",
                                            completion_window="24h")
        await until(lambda: recorded_lines(ledger_url, batch.id), lambda done: len(done) >= 8)
        os.killpg(served.proc.pid, signal.SIGKILL)
        await served.proc.wait()
    assert len(await recorded_lines(ledger_url, batch.id)) < LINES  # killed mid-batch
    async with gateway_process("serve", "--port", "0", "--config", config, env=clean_env()) as served:
        client = openai.AsyncOpenAI(base_url=f"{await served.ready_url()}/v1", api_key=org["api_key"], max_retries=0)
        done = await ended(client, batch.id)
        output = (await client.files.content(done.output_file_id)).content.splitlines()
    assert done.status == "completed" and done.request_counts.completed == LINES
    assert sorted(json.loads(line)["custom_id"] for line in output) == sorted(f"line-{n}" for n in range(LINES))
    assert sorted(await charges_per_line(ledger_url, batch.id)) == [1] * LINES
    verified = await run_cli_async("ledger", "verify", "--config", config)
    assert verified.returncode == 0, verified.stderr


async def test_a_native_batch_is_sent_upstream_once_across_a_kill_9(ledger_url, tmp_path, sim_url):
    org = await on_ledger(ledger_url, lambda r: admin.create_org(r, "batches", "100"))
    config = config_file(tmp_path, ledger_url, sim_url)
    await pause_simulator(sim_url, True)
    try:
        async with gateway_process("serve", "--port", "0", "--config", config, env=clean_env()) as served:
            client = openai.AsyncOpenAI(base_url=f"{await served.ready_url()}/v1", api_key=org["api_key"],
                                        max_retries=0)
            file_id = (await client.files.create(file=("in.jsonl", io.BytesIO(chat_lines("gpt-4o-mini", 5))),
                                                 purpose="batch")).id
            batch = await client.batches.create(input_file_id=file_id, endpoint="/v1/chat/completions",
                                                completion_window="24h")
            await until(lambda: batch_row(ledger_url, org["org_id"], batch.id), lambda row: row.upstream_id)
            os.killpg(served.proc.pid, signal.SIGKILL)
            await served.proc.wait()
        await pause_simulator(sim_url, False)
        async with gateway_process("serve", "--port", "0", "--config", config, env=clean_env()) as served:
            client = openai.AsyncOpenAI(base_url=f"{await served.ready_url()}/v1", api_key=org["api_key"],
                                        max_retries=0)
            done = await ended(client, batch.id)
    finally:
        await pause_simulator(sim_url, False)
    assert done.status == "completed" and done.request_counts.completed == 5
    assert len(await simulator_batches(sim_url)) == 1
    assert sorted(await charges_per_line(ledger_url, batch.id)) == [1] * 5
