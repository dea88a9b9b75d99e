"""One log pipeline that tells the truth (issue 14, point 3): a request's log line and its
metrics say how it really ended, and the standard library's loggers come out as the same
redacted JSON lines as the gateway's own.

Driven against a `gateway serve` process (aiohttp cancels a handler whose client leaves only
there, with handler_cancellation on), its stderr read line by line.
"""

import asyncio
import signal
import subprocess
import sys
import textwrap

import aiohttp
import pytest

from tests.gateway.gateway_helpers import (
    clean_env, gateway_process, json_lines, ledger_toml, one_json_object, run_cli, write_config,
)
from tests.support import PROVIDER_KEY, auth, chat_body, samples, value

CHAT = "/v1/chat/completions"
REALTIME = "/v1/realtime?model=gpt-4o-realtime-preview"


async def abandon_stream(session: aiohttp.ClientSession, url: str, key: str) -> str:
    """A streamed chat the client leaves after three chunks ("stop generating"); its request id."""
    body = {**chat_body("go [sim:hang_after=3]"), "stream": True}
    response = await session.post(f"{url}{CHAT}", json=body, headers=auth(key))
    received = b""
    while received.count(b"data: ") < 3:
        received += await asyncio.wait_for(response.content.readany(), 5)
    request_id = response.headers["X-Request-Id"]
    response.close()  # the connection goes with it
    return request_id


async def realtime_session(session: aiohttp.ClientSession, url: str, key: str) -> str:
    """A realtime session the client opens, hears from, and closes normally; its request id."""
    async with session.ws_connect(f"{url}{REALTIME}", headers=auth(key)) as ws:
        await ws.receive()
        request_id = ws._response.headers["X-Request-Id"]
        await ws.close()
    return request_id


@pytest.fixture
async def served(tmp_path, sim_url):
    """A gateway after an abandoned stream and a realtime session: (request ids by name, the
    /metrics text scraped once both were recorded, the request log lines, stderr)."""
    cfg = str(write_config(tmp_path, ledger_toml(tmp_path / "ledger.db")))
    created = run_cli("admin", "create-org", "acme", "--credits-inr", "10", "--config", cfg)
    key = one_json_object(created.stdout)["api_key"]
    env = clean_env(GATEWAY_PROVIDERS_OPENAI_BASE_URL=f"{sim_url}/v1", GATEWAY_PROVIDERS_OPENAI_API_KEY=PROVIDER_KEY)
    async with gateway_process("serve", "--port", "0", "--config", cfg, env=env) as gateway:
        url = await gateway.ready_url()
        async with aiohttp.ClientSession() as session:
            ids = {"abandoned": await abandon_stream(session, url, key),
                   "realtime": await realtime_session(session, url, key)}
            await gateway.wait_for_output(lambda _out, err: len(request_lines(err)) >= 2)
            async with session.get(f"{url}/metrics") as response:
                metrics = await response.text()
        assert await gateway.stop(signal.SIGTERM) == 0
    return ids, metrics, request_lines(gateway.stderr), gateway.stderr


def request_lines(stderr: str) -> list[dict]:
    return [line for line in json_lines(stderr) if line.get("event") == "request"]


def line_for(lines: list[dict], request_id: str) -> dict:
    (line,) = [line for line in lines if line["request_id"] == request_id]
    return line


async def test_a_stream_the_client_abandons_is_logged_and_counted_as_499(served):
    ids, metrics, lines, _ = served
    line = line_for(lines, ids["abandoned"])
    assert (line["route"], line["status"], line["model"], line["provider"]) == (CHAT, 499, "gpt-4o-mini", "openai")
    assert float(line["cost_inr"]) > 0  # charged for what was delivered, as the ledger says
    found = samples(metrics)
    assert value(found, "gateway_requests_total", route=CHAT, model="gpt-4o-mini", provider="openai",
                 status="499") == 1
    assert value(found, "gateway_requests_total", status="500") == 0


async def test_a_realtime_session_closed_normally_is_logged_as_101_with_its_close(served):
    ids, metrics, lines, _ = served
    line = line_for(lines, ids["realtime"])
    assert (line["status"], line["provider"], line["model"]) == (101, "openai", "gpt-4o-realtime-preview")
    assert (line["ws_close_code"], line["closed_by"]) == (1000, "client")
    found = samples(metrics)
    assert value(found, "gateway_requests_total", route="/v1/realtime", provider="openai", status="101") == 1
    assert value(found, "gateway_requests_total", route="/v1/realtime", status="500") == 0


async def test_every_line_of_the_served_gateway_is_json(served):
    *_, stderr = served
    assert stderr and len(json_lines(stderr)) == len(stderr.splitlines())


STANDARD_LOGGING = textwrap.dedent("""
    import logging, sys
    from gateway.ops import log_setup
    from gateway.accounts.redaction import Redactor
    log_setup.configure(redactor=Redactor([sys.argv[1]]), worker=7)
    logging.getLogger("ledger.writer").warning("ledger commits fail, each caller is told: %s", sys.argv[1])
    try:
        raise RuntimeError(f"upstream refused {sys.argv[1]}")
    except RuntimeError:
        logging.getLogger("storage.serving").exception("aborted the response")
    logging.getLogger("aiohttp.server").debug("below the level: not written")
""")


def test_standard_library_lines_are_redacted_json_with_level_time_and_logger():
    ran = subprocess.run([sys.executable, "-c", STANDARD_LOGGING, PROVIDER_KEY], capture_output=True, text=True,
                         env=clean_env(), timeout=30)
    assert ran.returncode == 0, ran.stderr
    assert PROVIDER_KEY not in ran.stderr
    warning, error = json_lines(ran.stderr)
    assert len(ran.stderr.splitlines()) == 2  # one line each, the traceback inside its JSON
    assert warning["event"] == "ledger commits fail, each caller is told: [redacted]"
    assert (warning["logger"], warning["level"], warning["worker"]) == ("ledger.writer", "warning", 7)
    assert warning["timestamp"].endswith("Z")
    assert (error["logger"], error["level"], error["event"]) == ("storage.serving", "error", "aborted the response")
    assert error["exception"].startswith("Traceback")
    assert "RuntimeError: upstream refused [redacted]" in error["exception"]
