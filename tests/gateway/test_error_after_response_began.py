"""A charge the ledger cannot record after a response has begun (speech's audio is out, a realtime
session is open): the begun response is cut, never followed by a second one, and sockets close."""

import contextlib
import sqlite3

import aiohttp
import msgspec
import pytest
import structlog

from tests.support import auth, ws_receive

LOCK_WAIT_S = 0.3  # the ledger's wait for its write lock in these tests


@pytest.fixture
async def locked_ledger_gateway(make_gateway, config):
    # Without holds: a hold, written before the answer began, would refuse the request instead.
    ledger = msgspec.structs.replace(config.ledger, timeout_s=LOCK_WAIT_S)
    billing = msgspec.structs.replace(config.billing, reserve=False)
    return await make_gateway(msgspec.structs.replace(config, ledger=ledger, billing=billing))


@contextlib.contextmanager
def write_lock_held(config):
    """Another process holds the SQLite write lock, so every append waits and gives up."""
    other = sqlite3.connect(config.ledger.url.removeprefix("sqlite:///"), isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        other.execute("ROLLBACK")
        other.close()


async def test_speech_whose_charge_cannot_be_recorded_is_cut_not_answered_twice(
        locked_ledger_gateway, config):
    gateway = locked_ledger_gateway
    org = await gateway.new_org("10")
    body = {"model": "tts-1", "input": "hello there", "voice": "alloy"}
    with write_lock_held(config), structlog.testing.capture_logs() as logs:
        response = await gateway.client.post("/v1/audio/speech", json=body, headers=auth(org["api_key"]))
        assert response.status == 200  # the audio began before the charge was attempted
        assert response.content_type == "audio/mpeg"
        with pytest.raises(aiohttp.ClientPayloadError):
            await response.read()  # a chunked body that never ends: visibly incomplete
    [began] = [line for line in logs if line["event"] == "error_after_response_began"]
    assert began["status"] == 503  # the ledger's refusal, logged since no second answer can carry it
    assert not [line for line in logs if line["event"] == "unhandled_error"]


async def test_realtime_session_whose_charge_cannot_be_recorded_still_closes_the_client(
        locked_ledger_gateway, config):
    gateway = locked_ledger_gateway
    org = await gateway.new_org("10")
    ws = await gateway.client.ws_connect("/v1/realtime?model=gpt-4o-realtime-preview", headers=auth(org["api_key"]))
    assert (await ws_receive(ws))["type"] == "session.created"
    with write_lock_held(config):
        await ws.close()  # the session ends; its record waits for the lock and gives up
    assert ws.closed
    # the relay is not left open: the next session opens and ends normally once the lock is gone
    again = await gateway.client.ws_connect("/v1/realtime?model=gpt-4o-realtime-preview",
                                            headers=auth(org["api_key"]))
    assert (await ws_receive(again))["type"] == "session.created"
    await again.close()
