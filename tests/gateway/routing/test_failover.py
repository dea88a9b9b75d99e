"""Failover between two providers of one model (sim-a first, sim-b second): what moves a request
on, what does not, what is charged (once, at the answering provider's price) and what is recorded."""

import json

import pytest

from tests.gateway.routing.duo_helpers import charge_at
from gateway.accounts import admin
from gateway.accounts.sealing import Sealer
from ledger.money import from_nano
from tests.support import PROVIDER_KEY, poll, sse_lines


async def test_a_503_fails_over_and_only_the_answer_is_charged_at_its_providers_price(duo):
    await duo.a.outage("503")
    response = await duo.chat()
    body = await response.json()
    assert response.status == 200 and response.headers["X-Gateway-Provider"] == "sim-b"
    assert await duo.calls() == (1, 1)
    [event] = await duo.completed(response.headers["X-Request-Id"])
    assert (event.provider, event.status) == ("sim-b", 200)
    assert [(a.provider, a.status) for a in event.attempts] == [("sim-a", 503), ("sim-b", 200)]
    assert "simulated outage: 503" in event.attempts[0].error
    usage = body["usage"]
    assert event.charged_inr_nano == charge_at("sim-b", usage["prompt_tokens"], usage["completion_tokens"]) > 0
    assert await duo.gateway.balance(duo.org["org_id"]) == 100 - from_nano(event.charged_inr_nano)


async def test_the_request_log_names_the_provider_that_answered_and_lists_the_attempts(duo):
    await duo.a.outage("500")
    response = await duo.chat()
    entry = await (await duo.gateway.client.get(f"/v1/logs/{response.headers['X-Request-Id']}",
                                                headers=duo.headers)).json()
    assert entry["provider"] == "sim-b"
    assert [(a["provider"], a["status"]) for a in entry["attempts"]] == [("sim-a", 500), ("sim-b", 200)]
    assert all(a["latency_ms"] >= 0 for a in entry["attempts"])


@pytest.mark.parametrize("mode", ["503", "429", "hang", "drop"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_failure_before_the_first_byte_fails_over(make_duo, mode, stream):
    duo = await make_duo(a_timeout_s=0.5)
    await duo.a.outage(mode)
    response = await duo.chat(stream=stream)
    assert response.status == 200 and response.headers["X-Gateway-Provider"] == "sim-b"
    if stream:
        lines = await sse_lines(response)
        assert lines[-1] == b"[DONE]" and not any(b'"error"' in line for line in lines)
    else:
        assert (await response.json())["choices"][0]["message"]["content"]
    assert await duo.calls() == (1, 1)
    [event] = await duo.completed(response.headers["X-Request-Id"])
    assert event.provider == "sim-b" and event.charged_inr_nano > 0
    assert [a.provider for a in event.attempts] == ["sim-a", "sim-b"]


async def test_a_stream_that_has_begun_never_fails_over(duo):
    response = await duo.chat("[sim:drop_after=2]", stream=True)
    lines = await sse_lines(response)
    assert response.status == 200 and b'"error"' in b"".join(lines)  # ended with an error event, as before
    assert await duo.calls() == (1, 0)  # never sent again: the client has its first chunks
    [event] = await duo.completed(response.headers["X-Request-Id"])
    assert (event.provider, event.status, event.charged_inr_nano) == ("sim-a", 502, 0)


@pytest.mark.parametrize("mode", ["400"])
async def test_a_request_the_provider_refuses_is_not_sent_elsewhere(duo, mode):
    await duo.a.outage(mode)
    response = await duo.chat()
    body = await response.json()
    assert response.status == 400 and body["error"]["usedProvider"] == "sim-a"
    assert await duo.calls() == (1, 0)
    [event] = await duo.completed(response.headers["X-Request-Id"])
    assert event.charged_inr_nano == 0 and [a.status for a in event.attempts] == [400]


async def test_a_pinned_provider_never_fails_over(duo):
    await duo.a.outage("503")
    response = await duo.chat(model="sim-a/duo-chat")
    body = await response.json()
    assert response.status == 502 and body["error"]["usedProvider"] == "sim-a"
    assert response.headers["X-Gateway-Provider"] == "sim-a"
    assert await duo.calls() == (1, 0)
    response = await duo.chat(model="sim-b/duo-chat")
    assert response.status == 200 and response.headers["X-Gateway-Provider"] == "sim-b"


async def test_when_every_provider_fails_the_client_hears_the_last_and_nothing_is_charged(duo):
    await duo.a.outage("503")
    await duo.b.outage("500")
    response = await duo.chat()
    body = await response.json()
    assert response.status == 502 and body["error"]["usedProvider"] == "sim-b"
    [event] = await duo.completed(response.headers["X-Request-Id"])
    assert event.charged_inr_nano == 0 and [(a.provider, a.status) for a in event.attempts] == \
        [("sim-a", 503), ("sim-b", 500)]
    assert await duo.gateway.balance(duo.org["org_id"]) == 100


async def test_max_attempts_bounds_the_providers_tried(make_duo):
    duo = await make_duo(max_attempts=1)
    await duo.a.outage("503")
    response = await duo.chat()
    assert response.status == 502 and await duo.calls() == (1, 0)


async def test_the_deadline_bounds_every_attempt_together(make_duo):
    duo = await make_duo(a_timeout_s=30, deadline_s=0.5)
    await duo.a.outage("hang")
    response = await duo.chat()
    body = await response.json()
    assert response.status == 504 and "routing deadline" in body["error"]["message"]
    assert await duo.calls() == (1, 0)


@pytest.mark.parametrize(("path", "body"), [
    ("/v1/messages", {"model": "duo-chat", "max_tokens": 50, "messages": [{"role": "user", "content": "hi"}]}),
    ("/v1/responses", {"model": "duo-chat", "input": "hi"}),
    ("/v1/embeddings", {"model": "duo-embed", "input": "hi"}),
], ids=["messages", "responses", "embeddings"])
async def test_every_routed_api_fails_over(duo, path, body):
    await duo.a.outage("503")
    response = await duo.gateway.client.post(path, json=body, headers=duo.headers)
    assert response.status == 200, await response.text()
    assert response.headers["X-Gateway-Provider"] == "sim-b"
    [event] = await duo.completed(response.headers["X-Request-Id"])
    assert [a.provider for a in event.attempts] == ["sim-a", "sim-b"] and event.charged_inr_nano > 0


async def test_a_realtime_session_fails_over_until_a_websocket_opens(duo):
    await duo.a.outage("503")
    async with duo.gateway.client.ws_connect("/v1/realtime?model=duo-realtime", headers=duo.headers) as ws:
        assert (await ws.receive_json())["type"] == "session.created"
    assert await duo.calls() == (1, 1)
    [event] = await poll(lambda: duo.completed_route("/v1/realtime"))
    assert event.provider == "sim-b" and [a.provider for a in event.attempts] == ["sim-a", "sim-b"]


async def test_music_never_fails_over_and_calls_upstream_once(duo):
    await duo.a.outage("503")
    response = await duo.gateway.client.post("/v1/music", json={"model": "duo-music", "prompt": "a calm tune"},
                                             headers=duo.headers)
    assert response.status == 502
    assert await duo.calls() == (1, 0)
    await duo.a.outage("")
    blocked = await duo.gateway.client.post(
        "/v1/music", json={"model": "duo-music", "prompt": "a tune [sim:block=prompt]"}, headers=duo.headers)
    assert blocked.status == 422  # a safety block is the request's, whichever provider
    assert await duo.calls() == (2, 0)


async def test_every_charge_is_recorded_once(duo):
    await duo.a.outage("503")
    ids = [(await duo.chat(stream=stream)).headers["X-Request-Id"] for stream in (False, True, False)]
    for request_id in ids:
        assert len(await duo.completed(request_id)) == 1
    print(json.dumps(ids))


async def test_an_organizations_own_key_applies_to_the_provider_it_is_for(make_duo):
    duo = await make_duo(master_key="m" * 32)
    await admin.set_provider_key(duo.gateway.ledger.recorder, Sealer("m" * 32), duo.org["org_id"], "sim-b",
                                 "sk-org-own-sim-b-key-0123456789", providers=("sim-a", "sim-b"))
    await duo.gateway.ledger.follower.catch_up()
    await duo.a.outage("503")
    response = await duo.chat()
    assert response.status == 200 and response.headers["X-Gateway-Provider"] == "sim-b"
    [event] = await duo.completed(response.headers["X-Request-Id"])
    assert event.cost_inr_nano > 0 and event.charged_inr_nano == 0  # paid with its own key at sim-b
    assert (await duo.b.last())["headers"]["authorization"] == "Bearer sk-org-own-sim-b-key-0123456789"
    assert (await duo.a.last())["headers"]["authorization"] == f"Bearer {PROVIDER_KEY}"
    await duo.a.outage("")
    [event] = await duo.completed((await duo.chat()).headers["X-Request-Id"])
    assert event.provider == "sim-a" and event.charged_inr_nano > 0  # sim-a: the gateway's key, from credits
