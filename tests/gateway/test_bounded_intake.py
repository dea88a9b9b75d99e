"""Bounded memory and connections (issue 12, point 8): credit is checked before a large body is
read, one budget bounds the request bodies a process holds at once, and slow or idle clients are
let go (header, body and keep-alive timeouts). Raw sockets, so the tests control every byte."""

import asyncio
import signal
import time
from pathlib import Path

import msgspec
import orjson
import pytest

from tests.support import auth, poll
from tests.gateway.gateway_helpers import clean_env, gateway_process, one_json_object, run_cli_async, write_config

MUSIC = "/v1/music"
CHAT = "/v1/chat/completions"
DEADLINE_S = 30.0  # for a close we wait on: generous, a loaded machine is slow, not wrong


def head(path: str, key: str, length: int, method: str = "POST") -> bytes:
    return (f"{method} {path} HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer {key}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n").encode()


async def connect(url: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    host, port = url.removeprefix("http://").split(":")
    return await asyncio.open_connection(host, int(port))


async def read_response(reader: asyncio.StreamReader, timeout: float = 5) -> tuple[int, dict, dict]:
    """Status, headers and JSON body of one response."""
    async with asyncio.timeout(timeout):
        status_line = await reader.readline()
        headers = {}
        while (line := await reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            headers[name.strip().lower()] = value.strip()
        body = await reader.readexactly(int(headers.get("content-length", 0)))
    return int(status_line.split()[1]), headers, orjson.loads(body) if body else {}


async def closed_after(reader: asyncio.StreamReader, limit_s: float) -> float:
    """Seconds until the server closes the connection (reading everything it sends)."""
    started = time.monotonic()
    async with asyncio.timeout(limit_s):
        while await reader.read(65536):
            pass
    return time.monotonic() - started


def with_server(config, **server) -> object:
    return msgspec.structs.replace(config, server=msgspec.structs.replace(config.server, **server))


# -- credit before the body ----------------------------------------------------------------------

async def test_an_org_without_credit_gets_402_before_sending_its_body(make_gateway, config):
    gateway = await make_gateway(config)
    broke = await gateway.new_org("0")
    reader, writer = await connect(gateway.url)
    writer.write(head(MUSIC, broke["api_key"], 100 * 1024 * 1024) + b'{"model": "tune-3-clip-preview", "prompt": "')
    await writer.drain()
    status, _, body = await read_response(reader)  # while 100 MB are still unsent
    assert status == 402 and body["error"]["type"] == "insufficient_credits"
    writer.close()


async def test_an_org_with_credit_is_not_refused_before_its_body(make_gateway, config):
    gateway = await make_gateway(config)
    paying = await gateway.new_org("10")
    response = await gateway.client.post(MUSIC, headers=auth(paying["api_key"]), json={"model": "tune-3-clip-preview"})
    assert response.status == 400  # the body was read: it lacks a prompt


# -- the body budget -----------------------------------------------------------------------------

@pytest.fixture
async def budgeted(make_gateway, config):
    gateway = await make_gateway(with_server(config, max_inflight_body_bytes=1_000_000, body_budget_wait_s=0.3))
    return gateway, await gateway.new_org("10")


async def test_a_body_that_does_not_fit_the_budget_waits_then_gets_503(budgeted):
    gateway, org = budgeted
    _reader, writer = await connect(gateway.url)
    writer.write(head(MUSIC, org["api_key"], 900_000) + b"{")  # holds 900 kB of the budget, sends 1 byte
    await writer.drain()
    await asyncio.sleep(0.1)
    started = time.monotonic()
    response = await gateway.client.post(CHAT, headers=auth(org["api_key"]), data=b" " * 200_000)
    body = await response.json()
    assert response.status == 503 and response.headers["Retry-After"] == "1"
    assert body["error"]["type"] == "service_unavailable" and time.monotonic() - started >= 0.3
    writer.close()  # the first request ends: its bytes go back to the budget (once the gateway sees it)
    again = await poll(lambda: gateway.client.post(CHAT, headers=auth(org["api_key"]), data=b" " * 200_000),
                       lambda response: response.status != 503)
    assert again.status == 400  # admitted and read: not JSON


async def test_a_waiting_body_is_admitted_when_another_ends_in_time(make_gateway, config):
    gateway = await make_gateway(with_server(config, max_inflight_body_bytes=1_000_000, body_budget_wait_s=5))
    org = await gateway.new_org("10")
    _reader, writer = await connect(gateway.url)
    writer.write(head(MUSIC, org["api_key"], 900_000) + b"{")
    await writer.drain()
    await asyncio.sleep(0.1)
    waiting = asyncio.create_task(gateway.client.post(CHAT, headers=auth(org["api_key"]), data=b" " * 200_000))
    await asyncio.sleep(0.3)
    assert not waiting.done()
    writer.close()
    assert (await waiting).status == 400


async def test_a_body_larger_than_the_whole_budget_is_413(budgeted):
    gateway, org = budgeted
    response = await gateway.client.post(MUSIC, headers=auth(org["api_key"]), data=b" " * 1_500_000)
    assert response.status == 413 and (await response.json())["error"]["type"] == "request_too_large"


async def test_a_chunked_body_draws_on_the_budget_as_it_arrives(budgeted):
    gateway, org = budgeted

    async def chunks():
        for _ in range(12):
            yield b" " * 100_000
    response = await gateway.client.post(MUSIC, headers=auth(org["api_key"]), data=chunks())
    assert response.status == 413  # 1.2 MB can never fit a 1 MB budget


async def test_the_fields_of_a_multipart_upload_draw_on_the_budget(budgeted):
    gateway, org = budgeted
    boundary = "b0undary"
    fields = b"".join(f'--{boundary}\r\nContent-Disposition: form-data; name="f{n}"\r\n\r\n'.encode()
                      + b"v" * 60_000 + b"\r\n" for n in range(20))

    async def chunked():  # no Content-Length: only the budget bounds what is held
        yield fields
        yield f"--{boundary}--\r\n".encode()
    response = await gateway.client.post(
        "/v1/audio/transcriptions", data=chunked(),
        headers={**auth(org["api_key"]), "Content-Type": f"multipart/form-data; boundary={boundary}"})
    assert response.status == 413 and "holds at once" in (await response.json())["error"]["message"]


# -- slow and idle clients (a `gateway serve` process, short timeouts) ----------------------------

@pytest.fixture
async def served(tmp_path):
    config = write_config(tmp_path, f'[ledger]\nurl = "sqlite:///{tmp_path}/ledger.db"\n'
                                    '[server]\nport = 0\nheader_timeout_s = 1\nbody_timeout_s = 1\n'
                                    'keepalive_timeout_s = 5\n')  # far from 1 s: no stall blurs which one cut
    created = await run_cli_async("admin", "create-org", "acme", "--credits-inr", "10", "--config", str(config))
    org = one_json_object(created.stdout)
    async with gateway_process("serve", "--config", str(config), env=clean_env()) as process:
        yield await process.ready_url(), org, process


async def test_slowloris_headers_are_cut_off_after_the_header_timeout(served):
    url, _, _ = served
    reader, writer = await connect(url)
    started = time.monotonic()

    async def trickle() -> None:
        for byte in b"GET / HTTP/1.1\r\nHost: gateway\r\nX-Slow: " + b"x" * 100:
            writer.write(bytes([byte]))
            await asyncio.sleep(0.05)
    dripping = asyncio.create_task(trickle())
    await closed_after(reader, DEADLINE_S)
    dripping.cancel()
    assert 0.9 <= time.monotonic() - started < 4  # the header timeout (1 s), before the keep-alive one (5 s)


async def test_an_idle_connection_is_closed_after_the_keepalive_timeout(served):
    url, _, _ = served
    reader, writer = await connect(url)
    assert 4.9 <= await closed_after(reader, DEADLINE_S) < 20  # the keep-alive timeout (5 s)
    reader, writer = await connect(url)
    writer.write(b"GET / HTTP/1.1\r\nHost: gateway\r\n\r\n")
    status, _, _ = await read_response(reader)
    assert status == 200
    assert 4.9 <= await closed_after(reader, DEADLINE_S) < 20  # idle after a request, too


async def test_a_trickled_body_gets_408_and_the_connection_is_closed(served):
    url, org, process = served
    reader, writer = await connect(url)
    writer.write(head(CHAT, org["api_key"], 1000) + b'{"model": ')
    started = time.monotonic()
    status, _headers, body = await read_response(reader)
    assert status == 408 and body["error"]["type"] == "request_timeout"
    assert 0.9 <= time.monotonic() - started < 4  # the body timeout (1 s), before the keep-alive one (5 s)
    assert await closed_after(reader, DEADLINE_S) < 4  # closed with the 408, not left to the keep-alive
    assert "request_body_timed_out" in process.stderr


async def test_a_steady_body_and_keepalive_requests_are_untouched(served):
    url, org, _ = served
    reader, writer = await connect(url)
    body = orjson.dumps({"model": "gpt-4o-mini", "messages": "not a list"})
    writer.write(head(CHAT, org["api_key"], len(body)))
    for start in range(0, len(body), 10):  # slower than the header timeout in total, never paused long
        writer.write(body[start:start + 10])
        await asyncio.sleep(0.2)
    status, _, _ = await read_response(reader)
    assert status == 400
    writer.write(b"GET / HTTP/1.1\r\nHost: gateway\r\n\r\n")  # the connection is still good
    assert (await read_response(reader))[0] == 200
    writer.close()


# -- memory under concurrent 100 MB bodies --------------------------------------------------------

def peak_rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    line = next(line for line in status.splitlines() if line.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024


async def test_four_concurrent_100_mb_music_bodies_keep_the_gateway_small(tmp_path, capsys):
    config = write_config(tmp_path, f'[ledger]\nurl = "sqlite:///{tmp_path}/ledger.db"\n'
                                    '[server]\nport = 0\nmax_inflight_body_bytes = 110_000_000\n'
                                    'body_budget_wait_s = 60\n')
    created = await run_cli_async("admin", "create-org", "acme", "--credits-inr", "10", "--config", str(config))
    org = one_json_object(created.stdout)
    body = b'{"model": "tune-3-clip-preview", "prompt": "' + b"x" * (100 * 1024 * 1024) + b'"}'
    async with gateway_process("serve", "--config", str(config), env=clean_env()) as process:
        url = await process.ready_url()
        before = peak_rss_mb(process.proc.pid)
        answers = await asyncio.gather(*(post_raw(url, org["api_key"], body) for _ in range(4)))
        peak = peak_rss_mb(process.proc.pid)
        assert await process.stop(signal.SIGTERM) == 0
    with capsys.disabled():
        print(f"\ngateway peak RSS: {before:.0f} MB idle, {peak:.0f} MB after four concurrent 100 MB bodies")
    assert answers == [400] * 4  # each was read (one at a time) and refused for its prompt
    assert peak < 320


async def post_raw(url: str, key: str, body: bytes) -> int:
    reader, writer = await connect(url)
    writer.write(head(MUSIC, key, len(body)))
    writer.write(body)
    await writer.drain()
    status, _, _ = await read_response(reader, timeout=120)
    writer.close()
    return status


async def test_a_request_aiohttp_cannot_parse_gets_the_json_error_body_and_no_key_is_logged(served):
    url, org, process = served
    reader, writer = await connect(url)
    writer.write(f"GET /v1/models HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer {org['api_key']}\x01\r\n"
                 "Bad Header Line\r\n\r\n".encode())
    status, headers, body = await read_response(reader)
    assert status == 400 and headers["content-type"].startswith("application/json")
    assert body["error"]["type"] == "invalid_request_error" and body["error"]["message"]
    assert await closed_after(reader, 2) < 1
    writer.close()
    assert "request_unreadable" in process.stderr and org["api_key"] not in process.stderr
