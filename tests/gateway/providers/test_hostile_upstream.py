"""A hostile upstream never moves money: whatever a provider's 200 holds (a negative, textual,
fractional, huge or inconsistent usage; a body or a chunk of the wrong shape; a stream cut
without its end marker), the client gets a 502 gateway_error (in the stream, when it has begun),
the ledger records the request with status 502 and charges nothing, and still verifies.

The simulator's hostile directives (`simulator.hostile`) make each fault.
"""

import sqlite3
from decimal import Decimal

import msgspec
import pytest

from gateway.providers.usage import MAX_REPORTED_SECONDS, MAX_REPORTED_TOKENS, Usage, checked_usage, reported_seconds, \
    token_count
from gateway.edge.errors import UpstreamError
from ledger import audit
from ledger.events import CreditsHeld, HoldReleased, HoldsRenewed
from simulator.mp3 import silent_mp3
from tests.support import auth, decimal_json, poll, request_events, single_attempt, sse_lines, transcription_form, \
    ws_receive, ws_until

GPT, CLAUDE, GEMINI = "gpt-4o-mini", "claude-haiku-4-5", "gemini-2.5-flash"
USAGE_FAULTS = ["negative", "string", "huge", "float", "bool", "cached_over"]
BODY_FAULTS = [f"usage={fault}" for fault in USAGE_FAULTS] + ["malformed"]
STREAM_FAULTS = [*BODY_FAULTS, "bad_chunk", "no_end"]
CHAT_MODELS = [GPT, CLAUDE, GEMINI]


@pytest.fixture
async def gateway(make_gateway, config):
    """One attempt per request: the faulty provider's answer is the one judged, never another
    provider of the same model's (the clouds serve these models too)."""
    return await make_gateway(single_attempt(config))


def chat(model: str, fault: str, **extra) -> dict:
    return {"model": model, "max_tokens": 20, **extra,
            "messages": [{"role": "user", "content": f"count for me [sim:{fault}] [sim:tokens=5]"}]}


async def assert_recorded_unbilled(gateway, org: dict, route: str) -> None:
    """One request, recorded with status 502 and charged nothing; the balance is unchanged to
    the nano, and the ledger still verifies."""
    (event,) = await request_events(gateway)
    assert (event.route, event.status, event.charged_inr_nano, event.cost_inr_nano) == (route, 502, 0, 0)
    assert await gateway.balance(org["org_id"]) == Decimal("100")
    checked, problems = await audit.verify(gateway.ledger.recorder)
    holding = [r for r in await gateway.events() if isinstance(r.event, CreditsHeld | HoldReleased | HoldsRenewed)]
    assert problems == [] and checked == 1 + 4 + len(holding)  # prices in force, org, key, credits, the request, holds
    assert sum(r.event.amount_inr_nano for r in holding if isinstance(r.event, HoldReleased)) == sum(
        r.event.amount_inr_nano for r in holding if isinstance(r.event, CreditsHeld) and r.event.request_id)


def assert_gateway_error(error: dict, provider: str, kind: str = "gateway_error") -> None:
    """`kind`: the error's type (on /v1/messages Anthropic's, `api_error`; `code` stays the gateway's)."""
    assert (error["type"], error["code"], error["usedProvider"]) == (kind, "gateway_error", provider)
    assert error["message"].startswith(provider)


@pytest.mark.parametrize("model,provider", [(GPT, "openai"), (CLAUDE, "anthropic"), (GEMINI, "google")])
@pytest.mark.parametrize("fault", BODY_FAULTS)
async def test_a_chat_answer_billing_cannot_trust_is_a_recorded_502_never_a_charge(gateway, org, model,
                                                                                   provider, fault):
    response = await gateway.client.post("/v1/chat/completions", json=chat(model, fault),
                                         headers=auth(org["api_key"]))
    assert response.status == 502 and response.content_type == "application/json"
    assert_gateway_error((await response.json())["error"], provider)
    await assert_recorded_unbilled(gateway, org, "/v1/chat/completions")


@pytest.mark.parametrize("model,provider", [(GPT, "openai"), (CLAUDE, "anthropic"), (GEMINI, "google")])
@pytest.mark.parametrize("fault", STREAM_FAULTS)
async def test_a_broken_chat_stream_ends_with_an_error_event_and_done_and_costs_nothing(gateway, org, model,
                                                                                       provider, fault):
    body = chat(model, fault, stream=True, stream_options={"include_usage": True})
    response = await gateway.client.post("/v1/chat/completions", json=body, headers=auth(org["api_key"]))
    assert response.status == 200
    data = await sse_lines(response)
    assert data[-1] == b"[DONE]"
    error = decimal_json(data[-2])["error"]
    assert_gateway_error(error, provider)
    assert not any(b'"cost_inr"' in line for line in data)  # no usage chunk: nothing was billed
    await assert_recorded_unbilled(gateway, org, "/v1/chat/completions")


async def test_the_error_names_what_was_wrong(gateway, org):
    response = await gateway.client.post("/v1/chat/completions", json=chat(GPT, "usage=negative"),
                                         headers=auth(org["api_key"]))
    message = (await response.json())["error"]["message"]
    assert message == "openai sent an invalid usage report: prompt_tokens is -50000000"
    stream = chat(GPT, "no_end", stream=True)
    data = await sse_lines(await gateway.client.post("/v1/chat/completions", json=stream,
                                                     headers=auth(org["api_key"])))
    assert decimal_json(data[-2])["error"]["message"] == "openai ended the stream before [DONE]"


async def raw_events(response) -> list[tuple[str, dict]]:
    frames = [frame for frame in (await response.read()).split(b"\n\n") if frame]
    return [(name.removeprefix(b"event: ").decode(), decimal_json(data.removeprefix(b"data: ")))
            for name, data in (frame.split(b"\n", 1) for frame in frames)]


@pytest.mark.parametrize("model,provider", [(CLAUDE, "anthropic"), (GPT, "openai"), (GEMINI, "google")])
@pytest.mark.parametrize("fault", BODY_FAULTS)
async def test_messages_answers_billing_cannot_trust_are_recorded_502s(gateway, org, model, provider, fault):
    response = await gateway.client.post("/v1/messages", json=chat(model, fault), headers=auth(org["api_key"]))
    assert response.status == 502
    assert_gateway_error((await response.json())["error"], provider, "api_error")
    await assert_recorded_unbilled(gateway, org, "/v1/messages")


@pytest.mark.parametrize("model,provider", [(CLAUDE, "anthropic"), (GPT, "openai"), (GEMINI, "google")])
@pytest.mark.parametrize("fault", STREAM_FAULTS)
async def test_broken_messages_streams_end_with_an_anthropic_error_event(gateway, org, model, provider, fault):
    response = await gateway.client.post("/v1/messages", json=chat(model, fault, stream=True),
                                         headers=auth(org["api_key"]))
    events = await raw_events(response)
    name, data = events[-1]
    assert name == "error" and data["type"] == "error"
    assert_gateway_error(data["error"], provider, "api_error")
    assert "message_stop" not in [name for name, _ in events]
    await assert_recorded_unbilled(gateway, org, "/v1/messages")


@pytest.mark.parametrize("fault", ["usage=negative", "usage=string", "usage=huge", "usage=float", "usage=bool",
                                   "malformed"])
async def test_an_embeddings_answer_billing_cannot_trust_is_a_recorded_502(gateway, org, fault):
    body = {"model": "text-embedding-3-small", "input": [f"one two [sim:{fault}]", "three"]}
    response = await gateway.client.post("/v1/embeddings", json=body, headers=auth(org["api_key"]))
    assert response.status == 502
    assert_gateway_error((await response.json())["error"], "openai")
    await assert_recorded_unbilled(gateway, org, "/v1/embeddings")


@pytest.mark.parametrize("fault", ["usage=negative", "usage=string", "usage=huge", "usage=bool", "malformed"])
@pytest.mark.parametrize("response_format", ["json", "verbose_json"])
async def test_a_transcription_billing_cannot_trust_is_a_recorded_502(gateway, org, fault, response_format):
    form = transcription_form(silent_mp3(2), prompt=f"[sim:{fault}]", response_format=response_format)
    response = await gateway.client.post("/v1/audio/transcriptions", data=form, headers=auth(org["api_key"]))
    assert response.status == 502
    assert_gateway_error((await response.json())["error"], "openai")
    await assert_recorded_unbilled(gateway, org, "/v1/audio/transcriptions")


async def test_sound_answers_around_the_bounds_are_billed_as_usual(gateway, org):
    # cached_over does not apply where no cache is reported; the answer is billed normally.
    body = {"model": "text-embedding-3-small", "input": "one two [sim:usage=cached_over]"}
    response = await gateway.client.post("/v1/embeddings", json=body, headers=auth(org["api_key"]))
    assert response.status == 200
    (event,) = await request_events(gateway)
    assert event.status == 200 and event.charged_inr_nano > 0


@pytest.mark.parametrize("route", ["/v1/chat/completions", "/v1/messages"])
async def test_a_stream_whose_charge_cannot_be_recorded_ends_with_an_error_event(make_gateway, config, tmp_path,
                                                                                 route):
    # Another process holds the SQLite write lock past the ledger's wait: the charge cannot commit.
    # (Without holds: a hold, written first, would fail the request before its stream began.)
    config = msgspec.structs.replace(config, ledger=msgspec.structs.replace(config.ledger, timeout_s=0.3),
                                     billing=msgspec.structs.replace(config.billing, reserve=False))
    gateway = await make_gateway(config)
    org = await gateway.new_org("100")
    holder = sqlite3.connect(tmp_path / "ledger.db", isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        response = await gateway.client.post(route, json=chat(GPT, "tokens=3", stream=True),
                                             headers=auth(org["api_key"]))
        body = await response.read()
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert response.status == 200
    frames = [frame for frame in body.split(b"\n\n") if frame]
    if route == "/v1/messages":
        name, data = frames[-1].split(b"\n", 1)
        assert name == b"event: error" and b"message_stop" not in body
        error = decimal_json(data.removeprefix(b"data: "))["error"]
        assert error["type"] == "overloaded_error"  # Anthropic's type for a 503
    else:
        assert frames[-1] == b"data: [DONE]"
        error = decimal_json(frames[-2].removeprefix(b"data: "))["error"]
        assert error["type"] == "service_unavailable"
    assert error["code"] == "service_unavailable"
    assert await request_events(gateway) == [] and await gateway.balance(org["org_id"]) == Decimal("100")


@pytest.mark.parametrize("fault", ["negative", "string", "huge", "float", "bool", "cached_over"])
async def test_a_realtime_usage_report_billing_cannot_trust_is_never_charged(gateway, org, fault):
    ws = await gateway.client.ws_connect("/v1/realtime?model=gpt-4o-realtime-preview", headers=auth(org["api_key"]))
    assert (await ws_receive(ws))["type"] == "session.created"
    await ws.send_json({"type": "session.update", "session": {"modalities": ["text"]}})
    await ws_until(ws, "session.updated")
    for text in ("one two three", f"four [sim:tokens=3] [sim:usage={fault}]"):
        await ws.send_json({"type": "conversation.item.create", "item": {
            "type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}})
        await ws.send_json({"type": "response.create"})
        await ws_until(ws, "response.done")
    await ws.close()
    (event,) = await poll(lambda: request_events(gateway), bool)
    # The sound first report is billed; the unsound second is not, and the session names it.
    assert (event.prompt_tokens, event.completion_tokens) == (7, 16)
    assert event.error.startswith("openai sent an invalid usage report")
    assert await gateway.balance(org["org_id"]) == Decimal("100") - Decimal(event.charged_inr_nano) / 10**9
    assert event.charged_inr_nano > 0 and (await audit.verify(gateway.ledger.recorder))[1] == []


@pytest.mark.parametrize("value,sound", [(0, True), (MAX_REPORTED_TOKENS, True), (None, True),
                                         (MAX_REPORTED_TOKENS + 1, False), (-1, False), (1.0, False),
                                         ("1", False), (True, False), ([1], False)])
def test_the_one_token_count_rule(value, sound):
    if sound:
        assert token_count("openai", {"n": value}, "n") == (value or 0)
    else:
        with pytest.raises(UpstreamError, match="openai sent an invalid usage report: n is"):
            token_count("openai", {"n": value}, "n")


def test_cached_and_cache_written_tokens_must_lie_within_the_prompt():
    assert checked_usage("anthropic", Usage(10, 1, 4, 6)) == Usage(10, 1, 4, 6)
    with pytest.raises(UpstreamError, match="exceed the 10 prompt tokens"):
        checked_usage("anthropic", Usage(10, 1, 5, 6))


@pytest.mark.parametrize("value", [-0.5, float("nan"), float("inf"), MAX_REPORTED_SECONDS + 1, "3", False])
def test_reported_seconds_outside_the_rule_are_refused(value):
    assert reported_seconds("openai", "duration", 12.5) == Decimal("12.5")
    with pytest.raises(UpstreamError, match="invalid usage report: duration is"):
        reported_seconds("openai", "duration", value)
