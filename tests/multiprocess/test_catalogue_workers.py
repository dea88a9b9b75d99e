"""`gateway serve --workers 2` and a changed catalogue (issue 38): SIGHUP to the parent puts the
file in force in every worker, all switching at the instant the publication states."""

import asyncio
import os
import signal
import time
from datetime import datetime

import aiohttp

from tests.gateway.gateway_helpers import gateway_process, json_lines, ledger_toml, write_config
from tests.gateway.prices.support import tiered_document, write_catalogue
from tests.support import clean_env

DEADLINE_S = 60.0


async def served_version(url: str) -> tuple[str, str]:
    """The version a fresh connection is told, and the request id (to find the worker that told it)."""
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as session, \
            session.get(f"{url}/v1/models") as response:
        return (await response.json())["price_version"], response.headers["X-Request-Id"]


async def test_sighup_to_the_parent_switches_every_worker_at_one_instant(tmp_path):
    catalogue = write_catalogue(tmp_path / "catalogue.json", tiered_document())
    config = write_config(tmp_path, ledger_toml(tmp_path / "ledger.db", f'[catalogue]\npath = "{catalogue}"\n'
                                                                         'switch_delay_s = 1.5\n'))
    async with gateway_process("serve", "--port", "0", "--workers", "2", "--config", str(config),
                               env=clean_env()) as served:
        url = await served.wait_for_output(lambda _out, err: next(
            (line["url"] for line in json_lines(err) if line.get("event") == "gateway_ready" and "workers" in line),
            None))
        old, _ = await served_version(url)
        document = tiered_document()
        document["data"][0]["providers"][0]["pricing"]["prompt"] = "0.0000002"
        write_catalogue(catalogue, document)
        os.kill(served.proc.pid, signal.SIGHUP)
        reloaded = await served.wait_for_output(lambda _out, err: next(
            (line for line in json_lines(err) if line.get("event") == "catalogue_reloaded"), None), DEADLINE_S)
        assert reloaded["changed"] and reloaded["switches"][0]["price_version"] != old
        new, instant = reloaded["switches"][0]["price_version"], reloaded["switches"][0]["effective_from"]
        await asyncio.sleep(max(0.0, datetime.fromisoformat(instant).timestamp() - time.time()))
        answers = [await served_version(url) for _ in range(40)]
        assert {version for version, _ in answers} == {new}
    asked = {request_id for _, request_id in answers}
    workers = {line["worker"] for line in json_lines(served.stderr)
               if line.get("event") == "request" and line.get("request_id") in asked}
    assert len(workers) == 2, "both workers answered after the instant, each with the new version"
