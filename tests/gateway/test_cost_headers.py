"""Every billed answer sent after its charge states its cost in headers (X-Gateway-Cost-INR,
-Cost-USD, -USD-INR-Rate, -Charged-INR), exactly what the ledger recorded and what the body says;
binary speech, priced by its input, states it before its first byte, and is charged exactly that.
Streams of tokens, sent before their charge, carry the cost in their final event instead."""

from decimal import Decimal

import msgspec
import pytest

from gateway.accounts import admin
from gateway.accounts.sealing import Sealer
from ledger.money import from_nano
from simulator.mp3 import silent_mp3
from tests.support import auth, chat_body, decimal_json, post_chat, request_events, transcription_form

COST_INR, COST_USD, RATE, CHARGED = ("X-Gateway-Cost-INR", "X-Gateway-Cost-USD", "X-Gateway-USD-INR-Rate",
                                     "X-Gateway-Charged-INR")
HEADERS = (COST_INR, COST_USD, RATE, CHARGED)
MASTER = "test-master-key-0123456789"


def stated(response) -> dict[str, Decimal]:
    """The cost headers as exact decimals."""
    return {name: Decimal(response.headers[name]) for name in HEADERS}


async def recorded(gateway) -> dict[str, Decimal]:
    """The one recorded request's amounts, by the header that states each."""
    (event,) = await request_events(gateway)
    return {COST_INR: from_nano(event.cost_inr_nano), COST_USD: from_nano(event.cost_usd_nano),
            RATE: Decimal(event.usd_to_inr), CHARGED: from_nano(event.charged_inr_nano)}


async def test_a_chat_completion_states_its_cost_as_the_body_and_the_ledger_do(gateway, org):
    response = await post_chat(gateway, org, chat_body("hi [sim:tokens=5]"))
    usage = decimal_json(await response.read())["usage"]
    assert stated(response) == await recorded(gateway)
    assert stated(response)[COST_INR] == usage["cost_inr"] == stated(response)[CHARGED] > 0
    assert (stated(response)[COST_USD], stated(response)[RATE]) == (usage["cost_usd_total"], usage["usd_to_inr"])
    assert response.headers[RATE] == "84" and response.headers["X-Request-Id"].startswith("req_")
    assert await gateway.balance(org["org_id"]) == 100 - stated(response)[CHARGED]


async def test_a_message_states_its_cost(gateway, org):
    body = {"model": "claude-haiku-4-5", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
    response = await gateway.client.post("/v1/messages", json=body, headers=auth(org["api_key"]))
    usage = decimal_json(await response.read())["usage"]
    assert stated(response) == await recorded(gateway)
    assert stated(response)[COST_INR] == usage["cost_inr"] > 0


async def test_embeddings_state_their_cost(gateway, org):
    response = await gateway.client.post("/v1/embeddings", json={"model": "text-embedding-3-small", "input": "hi"},
                                         headers=auth(org["api_key"]))
    usage = decimal_json(await response.read())["usage"]
    assert stated(response) == await recorded(gateway)
    assert (stated(response)[COST_INR], stated(response)[COST_USD]) == (usage["cost_inr"], usage["cost"])


@pytest.mark.parametrize("response_format", ["text", "srt", "vtt", "json"])
async def test_a_transcription_states_its_cost_in_every_format(gateway, org, response_format):
    form = transcription_form(silent_mp3(3.0), response_format=response_format)
    response = await gateway.client.post("/v1/audio/transcriptions", data=form, headers=auth(org["api_key"]))
    assert response.status == 200, await response.text()
    assert stated(response) == await recorded(gateway)
    assert stated(response)[CHARGED] == stated(response)[COST_INR] > 0


async def test_speech_states_its_price_before_the_audio_and_is_charged_exactly_that(gateway, org):
    text = "say this for me"
    response = await gateway.client.post("/v1/audio/speech", headers=auth(org["api_key"]),
                                         json={"model": "tts-1", "input": text, "voice": "alloy"})
    headers = stated(response)  # read before the body: the audio's price is known up front
    usd = len(text) * Decimal("0.000015")  # tts-1, USD per input character
    assert (headers[COST_USD], headers[COST_INR], headers[RATE]) == (usd, usd * 84, 84)
    assert len(await response.read()) > 0
    assert await recorded(gateway) == headers
    assert await gateway.balance(org["org_id"]) == 100 - headers[CHARGED]


async def test_streams_carry_the_cost_in_their_final_event_not_in_headers(gateway, org):
    response = await post_chat(gateway, org, chat_body("hi [sim:tokens=3]", stream=True))
    await response.read()
    assert response.headers["X-Request-Id"].startswith("req_")
    assert not set(HEADERS) & set(response.headers)


async def test_failures_state_no_cost(gateway, org):
    response = await post_chat(gateway, org, chat_body("x [sim:status=500]"))
    assert response.status == 502
    assert not set(HEADERS) & set(response.headers)


async def test_on_the_orgs_own_key_the_cost_is_stated_and_nothing_charged(make_gateway, config):
    gateway = await make_gateway(msgspec.structs.replace(config, secrets=msgspec.structs.replace(
        config.secrets, master_key=MASTER)))
    org = await gateway.new_org("100")
    await admin.set_provider_key(gateway.ledger.recorder, Sealer(MASTER), org["org_id"], "openai",
                                 "sk-org-own-openai-key-abcdefghijklmnop")
    await gateway.ledger.follower.catch_up()
    response = await post_chat(gateway, org, chat_body("hi [sim:tokens=2]"))
    usage = decimal_json(await response.read())["usage"]
    assert stated(response) == await recorded(gateway)
    assert stated(response)[COST_INR] == usage["cost_inr"] > 0 and stated(response)[CHARGED] == 0
    assert await gateway.balance(org["org_id"]) == 100


async def test_music_states_its_flat_price(gateway, org):
    response = await gateway.client.post("/v1/music", json={"model": "tune-3-clip-preview", "prompt": "calm piano"},
                                         headers=auth(org["api_key"]))
    usage = decimal_json(await response.read())["usage"]
    assert stated(response) == await recorded(gateway)
    assert (stated(response)[COST_USD], stated(response)[COST_INR]) == (usage["cost_usd"], usage["cost_inr"])
