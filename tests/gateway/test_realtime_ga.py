"""Realtime in the GA protocol (the default) and beta (asked for), relayed and billed alike, with the
openai SDK's `client.realtime` (GA) and `client.beta.realtime` end to end."""

from decimal import Decimal

import pytest

from ledger.money import from_nano
from simulator.textgen import completion_text
from tests.support import auth, poll, request_events, upstream_requests, ws_receive, ws_until

MODEL = "gpt-4o-realtime-preview"
PATH = f"/v1/realtime?model={MODEL}"
PROMPT, COMPLETION, RATE = Decimal("0.000005"), Decimal("0.00002"), Decimal("84.0")
USER_ITEM = {"type": "conversation.item.create",
             "item": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "one two three"}]}}


def inr(prompt: int, completion: int) -> Decimal:
    return (prompt * PROMPT + completion * COMPLETION) * RATE


async def recorded(gateway) -> list:
    return await poll(lambda: request_events(gateway), lambda events: len(events) >= 1)


async def handshake_headers(gateway, simulator) -> dict:
    [handshake] = [r for r in await upstream_requests(gateway, simulator) if r["path"] == "/v1/realtime"]
    return handshake["headers"]


async def test_a_client_that_asks_for_nothing_speaks_ga_end_to_end(gateway, org, simulator):
    ws = await gateway.client.ws_connect(PATH, headers=auth(org["api_key"]))
    created = await ws_receive(ws)
    assert created["type"] == "session.created" and created["session"]["type"] == "realtime"
    await ws.send_json({"type": "session.update", "session": {"type": "realtime", "output_modalities": ["text"]}})
    assert (await ws_receive(ws))["type"] == "session.updated"
    await ws.send_json(USER_ITEM)
    assert [(await ws_receive(ws))["type"] for _ in range(2)] == ["conversation.item.added", "conversation.item.done"]
    await ws.send_json({"type": "response.create"})
    events = await ws_until(ws, "response.done")
    kinds = {event["type"] for event in events}
    assert "response.output_text.delta" in kinds and "response.text.delta" not in kinds
    assert events[-1]["response"]["usage"]["output_tokens"] == 16
    await ws.close()
    assert "openai-beta" not in await handshake_headers(gateway, simulator)  # GA asked of the provider too
    [event] = await recorded(gateway)
    assert (event.status, event.prompt_tokens, event.completion_tokens) == (200, 7, 16)
    assert from_nano(event.charged_inr_nano) == inr(7, 16)


@pytest.mark.parametrize("asked", [{"headers": {"OpenAI-Beta": "realtime=v1"}},
                                   {"protocols": ("realtime", "openai-beta.realtime-v1")}])
async def test_a_client_that_asks_for_beta_gets_beta_from_the_provider(gateway, org, simulator, asked):
    headers = {**auth(org["api_key"]), **asked.get("headers", {})}
    ws = await gateway.client.ws_connect(PATH, headers=headers, protocols=asked.get("protocols", ()))
    created = await ws_receive(ws)
    assert "type" not in created["session"] and "modalities" in created["session"]  # beta's session
    await ws.send_json(USER_ITEM)
    assert (await ws_receive(ws))["type"] == "conversation.item.created"
    await ws.close()
    assert (await handshake_headers(gateway, simulator))["openai-beta"] == "realtime=v1"


def sdk_client(gateway, org):
    openai = pytest.importorskip("openai")
    pytest.importorskip("websockets")  # the SDK's realtime transport
    return openai.AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=org["api_key"], max_retries=0,
                              websocket_base_url=f"{gateway.url.replace('http', 'ws', 1)}/v1")


async def test_the_openai_sdk_client_realtime_parses_every_ga_event_and_is_billed(gateway, org):
    from openai.types.realtime import ResponseDoneEvent, ResponseTextDeltaEvent
    client = sdk_client(gateway, org)
    async with client.realtime.connect(model=MODEL) as connection:
        await connection.session.update(session={"type": "realtime", "output_modalities": ["text"]})
        await connection.conversation.item.create(item=USER_ITEM["item"])
        await connection.response.create()
        deltas, kinds = [], []
        async for event in connection:
            kinds.append(event.type)
            if isinstance(event, ResponseTextDeltaEvent):
                deltas.append(event.delta)
            if isinstance(event, ResponseDoneEvent):
                assert event.response.usage.output_tokens == 16
                break
    assert "".join(deltas) == completion_text(16)  # parsed as the SDK's GA types, not left unknown
    assert {"session.created", "session.updated", "conversation.item.added", "response.done"} <= set(kinds)
    [event] = await recorded(gateway)
    assert from_nano(event.charged_inr_nano) == inr(7, 16)
