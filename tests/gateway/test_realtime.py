"""GET /v1/realtime: a WebSocket relayed to the simulator's realtime API, billed from response.done."""

import base64
import os
import socket
from decimal import Decimal
from typing import Any

import aiohttp
import msgspec
import orjson
import pytest

from gateway.accounts import admin
from gateway.billing.pricing import Usage
from gateway.realtime.session import close_code, reported_usage
from gateway.accounts.sealing import Sealer
from ledger.events import RequestCompleted
from ledger.money import from_nano
from ledger.backends.sqlite import SQLiteRecorder
from simulator.textgen import completion_text
from tests.support import (
    PROVIDER_KEY, auth, chat_body, decimal_json, poll, request_events, upstream_requests, ws_receive, ws_until,
)

MODEL = "gpt-4o-realtime-preview"
PATH = f"/v1/realtime?model={MODEL}"
PROMPT, COMPLETION, CACHE_READ = Decimal("0.000005"), Decimal("0.00002"), Decimal("0.0000025")
RATE = Decimal("84.0")
TEXT_ONLY = {"type": "session.update", "session": {"modalities": ["text"]}}
RESPONSE_CREATE = {"type": "response.create"}
OPENING = ["response.created", "response.output_item.added", "response.content_part.added"]
CLOSING = ["response.text.done", "response.content_part.done", "response.output_item.done", "response.done"]
BETA = {"OpenAI-Beta": "realtime=v1"}
UPGRADE = {"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13"}


def user_item(text: str) -> dict[str, Any]:
    return {"type": "conversation.item.create",
            "item": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}}


def inr(prompt: int, completion: int, cached: int = 0) -> Decimal:
    """What a usage costs in INR at the realtime model's prices."""
    return ((prompt - cached) * PROMPT + cached * CACHE_READ + completion * COMPLETION) * RATE


def key_protocol(key: str) -> str:
    return f"openai-insecure-api-key.{key}"


async def connect(gateway, key: str, **kwargs) -> aiohttp.ClientWebSocketResponse:
    """A beta session through the gateway (the event names these tests read are beta's), past the
    relayed session.created."""
    kwargs.setdefault("headers", {**auth(key), **BETA})
    ws = await gateway.client.ws_connect(PATH, **kwargs)
    assert (await ws_receive(ws))["type"] == "session.created"
    return ws


async def text_session(gateway, key: str) -> aiohttp.ClientWebSocketResponse:
    ws = await connect(gateway, key)
    await ws.send_json(TEXT_ONLY)
    assert (await ws_receive(ws))["type"] == "session.updated"
    return ws


async def ask(ws, text: str) -> list[dict[str, Any]]:
    """One user item and a response.create; the events up to the first delta."""
    await ws.send_json(user_item(text))
    assert (await ws_receive(ws))["type"] == "conversation.item.created"
    await ws.send_json(RESPONSE_CREATE)
    return [await ws_receive(ws) for _ in range(len(OPENING) + 1)]


async def say(ws, text: str) -> list[dict[str, Any]]:
    """One full response: every event up to response.done."""
    return await ask(ws, text) + await ws_until(ws, "response.done")


async def recorded(gateway, count: int = 1) -> list:
    """The ledger's RequestCompleted events, once `count` are there (a session records as it ends)."""
    return await poll(lambda: request_events(gateway), lambda events: len(events) >= count)


async def upgrade(gateway, path: str = PATH, headers: dict | None = None) -> aiohttp.ClientResponse:
    """A WebSocket upgrade request sent as plain HTTP, to read the answer of a refused one."""
    key = base64.b64encode(os.urandom(16)).decode()
    return await gateway.client.get(path, headers={**UPGRADE, "Sec-WebSocket-Key": key, **(headers or {})})


async def handshake(gateway, path: str = PATH, headers: dict | None = None) -> tuple[int, dict]:
    """An upgrade request the gateway refuses: its status and JSON error body."""
    response = await upgrade(gateway, path, headers)
    assert response.status != 101
    return response.status, decimal_json(await response.read())


async def realtime_records(gateway, simulator) -> list[dict]:
    return [r for r in await upstream_requests(gateway, simulator) if r["path"] == "/v1/realtime"]


# -- the round trip and billing -------------------------------------------------------------------

async def test_round_trip_relays_every_event_in_order_and_bills_the_session(gateway, org, simulator):
    ws = await text_session(gateway, org["api_key"])
    events = await say(ws, "one two three")
    assert [e["type"] for e in events] == OPENING + ["response.text.delta"] * 16 + CLOSING
    assert "".join(e["delta"] for e in events if e["type"] == "response.text.delta") == completion_text(16)
    assert events[-1]["response"]["usage"]["input_tokens"] == 7  # relayed untouched
    await ws.close()
    [event] = await recorded(gateway)
    assert (event.route, event.model, event.provider, event.status, event.stream) == (
        "/v1/realtime", MODEL, "openai", 200, True)
    assert (event.prompt_tokens, event.completion_tokens) == (7, 16)
    assert from_nano(event.charged_inr_nano) == from_nano(event.cost_inr_nano) == inr(7, 16)
    assert await gateway.balance(org["org_id"]) == 100 - inr(7, 16)
    [upstream] = await realtime_records(gateway, simulator)
    assert upstream["query"] == {"model": MODEL}
    assert upstream["headers"]["authorization"] == f"Bearer {PROVIDER_KEY}"
    assert upstream["headers"]["openai-beta"] == "realtime=v1"
    assert upstream["body"] == [TEXT_ONLY, user_item("one two three"), RESPONSE_CREATE]


async def test_two_responses_are_billed_once_as_their_summed_usage(gateway, org):
    ws = await text_session(gateway, org["api_key"])
    first = (await say(ws, "one two three"))[-1]["response"]["usage"]
    second = (await say(ws, "four five [sim:tokens=3] [sim:cache_read=10]"))[-1]["response"]["usage"]
    await ws.close()
    assert (first["input_tokens"], first["output_tokens"]) == (7, 16)
    assert (second["input_tokens"], second["output_tokens"]) == (35, 3)
    [event] = await recorded(gateway)
    assert (event.prompt_tokens, event.completion_tokens) == (42, 19)
    assert from_nano(event.charged_inr_nano) == inr(42, 19, cached=10)
    assert await gateway.balance(org["org_id"]) == 100 - inr(42, 19, cached=10)


async def test_a_server_shutting_down_ends_open_sessions_and_records_their_charge(gateway, org, config):
    ws = await text_session(gateway, org["api_key"])
    usage = (await say(ws, "one two three"))[-1]["response"]["usage"]
    await gateway.server.close()  # on_shutdown, then the ledger closes
    assert (await ws.receive()).type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
    reopened = SQLiteRecorder.from_url(config.ledger.url)
    await reopened.open()
    try:
        [event] = [r.event for r in await reopened.read() if isinstance(r.event, RequestCompleted)]
    finally:
        await reopened.close()
    assert (event.route, event.prompt_tokens, event.completion_tokens) == (
        "/v1/realtime", usage["input_tokens"], usage["output_tokens"])
    assert event.charged_inr_nano > 0


async def test_binary_frames_are_relayed_both_ways(gateway, org, simulator):
    ws = await connect(gateway, org["api_key"])
    await ws.send_bytes(b"\x00\xffaudio")
    echoed = await ws.receive()
    assert (echoed.type, echoed.data) == (aiohttp.WSMsgType.BINARY, b"\x00\xffaudio")
    await ws.close()
    [upstream] = await realtime_records(gateway, simulator)
    assert upstream["body"] == [{"binary_bytes": 7}]


@pytest.mark.parametrize("how", ["close", "abort"])
async def test_client_leaving_mid_response_is_billed_for_the_usage_seen(gateway, org, simulator, how):
    ws = await text_session(gateway, org["api_key"])
    await say(ws, "one two three")
    assert (await ask(ws, "more [sim:hang_after=2]"))[-1]["type"] == "response.text.delta"
    if how == "close":
        await ws.close()
    else:  # the TCP connection ends without a close frame
        ws.get_extra_info("socket").shutdown(socket.SHUT_RDWR)
    [event] = await recorded(gateway)
    assert (event.status, event.prompt_tokens, event.completion_tokens) == (200, 7, 16)
    assert from_nano(event.charged_inr_nano) == inr(7, 16)
    upstream = await poll(lambda: realtime_records(gateway, simulator),
                          lambda found: found[0]["outcome"] != "pending")
    assert upstream[0]["outcome"] == "completed"  # the gateway closed the provider's side cleanly


async def test_provider_closing_ends_the_client_session_cleanly(gateway, org):
    ws = await text_session(gateway, org["api_key"])
    await say(ws, "one two three")
    await ask(ws, "bye [sim:close_after=2]")
    assert (await ws_receive(ws))["type"] == "response.text.delta"
    closing = await ws.receive()
    assert (closing.type, closing.data) == (aiohttp.WSMsgType.CLOSE, 1000)
    [event] = await recorded(gateway)
    assert (event.status, event.prompt_tokens, event.completion_tokens, event.error) == (200, 7, 16, "")
    assert from_nano(event.charged_inr_nano) == inr(7, 16)


async def test_provider_dropping_the_connection_closes_the_client_with_1011(gateway, org):
    ws = await text_session(gateway, org["api_key"])
    await say(ws, "one two three")
    await ask(ws, "[sim:drop_after=1]")
    closing = await ws.receive()
    assert (closing.type, closing.data) == (aiohttp.WSMsgType.CLOSE, 1011)
    [event] = await recorded(gateway)
    assert (event.prompt_tokens, event.completion_tokens) == (7, 16)
    assert from_nano(event.charged_inr_nano) == inr(7, 16) and "broke off" in event.error


# -- keys and subprotocols ------------------------------------------------------------------------

async def test_browser_key_subprotocol_is_accepted_and_the_handshake_selects_realtime(
        gateway, org, simulator, caplog):
    protocols = ("realtime", key_protocol(org["api_key"]), "openai-beta.realtime-v1")
    ws = await connect(gateway, org["api_key"], headers={}, protocols=protocols)
    assert ws.protocol == "realtime"
    await ws.close()
    assert org["api_key"] not in caplog.text
    [upstream] = await realtime_records(gateway, simulator)
    assert upstream["headers"]["authorization"] == f"Bearer {PROVIDER_KEY}"
    assert org["api_key"] not in orjson.dumps(upstream).decode()  # the gateway's key stays here


@pytest.mark.parametrize(("protocols", "selected"), [((), None), (("realtime",), "realtime")])
async def test_bearer_header_works_with_or_without_the_realtime_subprotocol(
        gateway, org, protocols, selected):
    ws = await connect(gateway, org["api_key"], protocols=protocols)
    assert ws.protocol == selected
    await ws.close()


@pytest.mark.parametrize("others", ["", "openai-beta.realtime-v1, "])
async def test_key_subprotocol_without_realtime_is_refused_and_never_logged(gateway, org, caplog, others):
    offered = others + key_protocol(org["api_key"])
    status, body = await handshake(gateway, headers={"Sec-WebSocket-Protocol": offered})
    assert status == 400 and body["error"]["param"] == "Sec-WebSocket-Protocol"
    assert org["api_key"] not in body["error"]["message"] and org["api_key"] not in caplog.text


@pytest.mark.parametrize("headers", [
    {}, {"Authorization": "Bearer gwk_not_a_key"},
    {"Sec-WebSocket-Protocol": f"realtime, {key_protocol('gwk_not_a_key')}"}])
async def test_missing_or_invalid_key_is_401_before_the_upgrade(gateway, org, simulator, headers):
    status, body = await handshake(gateway, headers=headers)
    assert status == 401 and body["error"]["type"] == "authentication_error"
    assert await realtime_records(gateway, simulator) == []


# -- refused before the upgrade -------------------------------------------------------------------

@pytest.mark.parametrize("query", ["", "?model=", "?model=no-such-model", "?model=gpt-4o-mini",
                                   "?model=text-embedding-3-small"])
async def test_missing_unknown_or_non_realtime_model_is_400(gateway, org, simulator, query):
    status, body = await handshake(gateway, f"/v1/realtime{query}", auth(org["api_key"]))
    assert status == 400 and body["error"]["param"] == "model"
    assert await realtime_records(gateway, simulator) == []


async def test_a_plain_get_is_400_and_the_chat_route_refuses_the_realtime_model(gateway, org):
    plain = await gateway.client.get(PATH, headers=auth(org["api_key"]))
    assert plain.status == 400 and "Upgrade" in (await plain.json())["error"]["message"]
    chat = await gateway.client.post("/v1/chat/completions", json=chat_body(model=MODEL),
                                     headers=auth(org["api_key"]))
    assert chat.status == 400 and (await chat.json())["error"]["param"] == "model"


async def test_no_credit_is_402_before_the_upgrade(gateway, simulator):
    broke = await gateway.new_org("0")
    status, body = await handshake(gateway, headers=auth(broke["api_key"]))
    assert status == 402 and body["error"]["type"] == "insufficient_credits"
    assert await realtime_records(gateway, simulator) == []


@pytest.mark.parametrize(("upstream", "client"), [(429, 429), (503, 502), (401, 502), (400, 400)])
async def test_provider_refusing_the_handshake_is_an_error_response_not_charged(
        gateway, org, simulator, upstream, client):
    await gateway.client.session.post(simulator.make_url("/_sim/realtime"), json={"status": upstream})
    status, body = await handshake(gateway, headers=auth(org["api_key"]))
    assert status == client
    error = body["error"]
    assert (error["type"], error["usedProvider"], error["requestedModel"]) == (
        "gateway_error", "openai", MODEL)
    assert PROVIDER_KEY not in error["message"]
    [event] = await recorded(gateway)
    assert (event.status, event.charged_inr_nano) == (client, 0)
    assert await gateway.balance(org["org_id"]) == 100


async def test_provider_429_keeps_its_retry_after(gateway, org, simulator):
    await gateway.client.session.post(simulator.make_url("/_sim/realtime"), json={"status": 429})
    response = await upgrade(gateway, headers=auth(org["api_key"]))
    assert response.status == 429 and response.headers["Retry-After"] == "1"


def with_openai(config, **changes):
    openai = msgspec.structs.replace(config.providers["openai"], **changes)
    return msgspec.structs.replace(config, providers={**config.providers, "openai": openai})


async def test_provider_unreachable_is_502(make_gateway, config):
    with socket.socket() as probe:  # a port nothing listens on once closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    gateway = await make_gateway(with_openai(config, base_url=f"http://127.0.0.1:{port}/v1"))
    org = await gateway.new_org("100")
    status, body = await handshake(gateway, headers=auth(org["api_key"]))
    assert status == 502 and body["error"]["type"] == "gateway_error"
    [event] = await recorded(gateway)
    assert (event.status, event.charged_inr_nano) == (502, 0)


async def test_provider_not_answering_the_handshake_is_504(make_gateway, config, simulator):
    gateway = await make_gateway(with_openai(config, timeout_s=0.2))
    org = await gateway.new_org("100")
    await gateway.client.session.post(simulator.make_url("/_sim/realtime"), json={"hang": True})
    status, body = await handshake(gateway, headers=auth(org["api_key"]))
    assert status == 504 and body["error"]["type"] == "gateway_error"
    [event] = await recorded(gateway)
    assert (event.status, event.charged_inr_nano) == (504, 0)


# -- an organization's own key --------------------------------------------------------------------

async def test_own_openai_key_is_used_and_the_session_is_recorded_but_not_charged(
        make_gateway, config, simulator):
    master = "test-master-key-0123456789"
    gateway = await make_gateway(msgspec.structs.replace(
        config, secrets=msgspec.structs.replace(config.secrets, master_key=master)))
    org = await gateway.new_org("0")  # no credit: its own key is what admits it
    await admin.set_provider_key(gateway.ledger.recorder, Sealer(master), org["org_id"], "openai",
                                 "sk-org-own-key-1")
    await gateway.ledger.follower.catch_up()
    ws = await text_session(gateway, org["api_key"])
    await say(ws, "one two three")
    await ws.close()
    [event] = await recorded(gateway)
    assert from_nano(event.cost_inr_nano) == inr(7, 16) and event.charged_inr_nano == 0
    [upstream] = await realtime_records(gateway, simulator)
    assert upstream["headers"]["authorization"] == "Bearer sk-org-own-key-1"


# -- the pure parts -------------------------------------------------------------------------------

def test_reported_usage_reads_only_response_done_events():
    usage = {"input_tokens": 12, "output_tokens": 5,
             "input_token_details": {"cached_tokens": 4, "audio_tokens": 0}}
    done = {"type": "response.done", "response": {"id": "resp_1", "usage": usage}}
    assert reported_usage(orjson.dumps(done).decode()) == Usage(12, 5, 4)
    delta = {"type": "response.text.delta", "delta": 'say "response.done"'}
    assert reported_usage(orjson.dumps(delta).decode()) is None
    assert reported_usage('{"type": "response.done", "response": {"usage": null}}') is None
    assert reported_usage('not json "response.done"') is None


@pytest.mark.parametrize(("message", "code"), [
    (aiohttp.WSMessage(aiohttp.WSMsgType.CLOSE, 1000, ""), 1000),
    (aiohttp.WSMessage(aiohttp.WSMsgType.CLOSE, 4001, "expired"), 4001),
    (aiohttp.WSMessage(aiohttp.WSMsgType.CLOSE, 1005, ""), 1000),
    (aiohttp.WSMessage(aiohttp.WSMsgType.CLOSING, None, None), 1000),
    (aiohttp.WSMessage(aiohttp.WSMsgType.CLOSED, None, None), 1011),
    (aiohttp.WSMessage(aiohttp.WSMsgType.ERROR, ValueError(), None), 1011)])
def test_close_codes_relay_deliberate_ends_and_mark_lost_connections(message, code):
    assert close_code(message, lost=1011) == code


# -- the official SDK -----------------------------------------------------------------------------

async def test_openai_sdk_realtime_session_round_trip(gateway, org):
    openai = pytest.importorskip("openai")
    pytest.importorskip("websockets")  # the SDK's realtime transport
    client = openai.AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=org["api_key"], max_retries=0,
                                websocket_base_url=f"{gateway.url.replace('http', 'ws', 1)}/v1")
    async with client.beta.realtime.connect(model=MODEL) as connection:
        await connection.session.update(session={"modalities": ["text"]})
        await connection.conversation.item.create(item={
            "type": "message", "role": "user", "content": [{"type": "input_text", "text": "one two three"}]})
        await connection.response.create()
        deltas = []
        async for event in connection:
            if event.type == "response.text.delta":
                deltas.append(event.delta)
            if event.type == "response.done":
                assert event.response.usage.output_tokens == 16
                break
    assert "".join(deltas) == completion_text(16)
    [event] = await recorded(gateway)
    assert from_nano(event.charged_inr_nano) == inr(7, 16)
