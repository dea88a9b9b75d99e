"""Chat completions through the gateway, JSON and streamed, against the simulator."""

import asyncio
import json
from decimal import Decimal

import msgspec
import orjson
import pytest

from gateway.catalogue import SHIPPED_PATH, CatalogueError
from ledger.events import RequestCompleted
from simulator.textgen import completion_text
from tests.support import auth, chat_body, decimal_json, poll, request_events, single_attempt, sse_lines

PROMPT_PRICE, COMPLETION_PRICE = Decimal("0.00000015"), Decimal("0.0000006")  # gpt-4o-mini
RATE = Decimal("84.0")


def prompt_tokens(text: str) -> int:
    return len(text.split()) + 4  # the simulator's deterministic count


async def test_json_completion_carries_exact_usage_and_cost(gateway, org):
    response = await gateway.client.post("/v1/chat/completions", json=chat_body("one two three"),
                                         headers=auth(org["api_key"]))
    assert response.status == 200
    body = decimal_json(await response.read())
    assert body["choices"][0]["message"]["content"] == completion_text(16)
    usage = body["usage"]
    assert (usage["prompt_tokens"], usage["completion_tokens"], usage["total_tokens"]) == (7, 16, 23)
    assert usage["cost_usd_input"] == 7 * PROMPT_PRICE
    assert usage["cost_usd_output"] == 16 * COMPLETION_PRICE
    assert usage["cost_usd_total"] == 7 * PROMPT_PRICE + 16 * COMPLETION_PRICE
    assert usage["cost_inr"] == usage["cost_usd_total"] * RATE
    assert response.headers["X-Request-Id"].startswith("req_")


async def test_cached_prompt_tokens_reported_by_openai_cost_the_cache_read_price(gateway, org):
    response = await gateway.client.post("/v1/chat/completions", headers=auth(org["api_key"]),
                                         json=chat_body("w " * 30 + "[sim:cache_read=20] [sim:tokens=2]"))
    usage = decimal_json(await response.read())["usage"]
    prompt, read = Decimal("0.00000015"), Decimal("0.000000075")  # gpt-4o-mini
    assert usage["prompt_tokens_details"] == {"cached_tokens": 20}
    assert usage["cost_usd_input"] == (usage["prompt_tokens"] - 20) * prompt + 20 * read


async def test_prefixed_and_aliased_model_ids_resolve(gateway, org):
    for model in ("openai/gpt-4o-mini", "gpt-4o"):
        response = await gateway.client.post(
            "/v1/chat/completions", json={**chat_body(), "model": model}, headers=auth(org["api_key"]))
        assert response.status == 200, await response.text()


async def test_unknown_request_fields_pass_through_to_upstream(gateway, org, simulator):
    await gateway.client.post("/v1/chat/completions", json=chat_body(temperature=0.2, user="u1"),
                              headers=auth(org["api_key"]))
    recorded = await (await gateway.client.session.get(simulator.make_url("/_sim/requests"))).json()
    sent = recorded["data"][-1]
    assert sent["body"]["temperature"] == 0.2 and sent["body"]["user"] == "u1"
    assert sent["headers"]["authorization"].startswith("Bearer sk-sim-provider")


async def test_stream_relays_chunks_and_final_usage_when_asked(gateway, org):
    body = chat_body("a b [sim:tokens=5]", stream=True, stream_options={"include_usage": True})
    response = await gateway.client.post("/v1/chat/completions", json=body, headers=auth(org["api_key"]))
    assert response.status == 200
    assert response.headers["Content-Type"].startswith("text/event-stream")
    events = await sse_lines(response)
    assert events[-1] == b"[DONE]"
    chunks = [orjson.loads(e) for e in events[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == completion_text(5)
    usage = decimal_json(events[-2])["usage"]
    assert chunks[-1]["choices"] == [] and usage["completion_tokens"] == 5
    assert usage["cost_inr"] == (usage["prompt_tokens"] * PROMPT_PRICE + 5 * COMPLETION_PRICE) * RATE


async def test_streamed_responses_name_their_request_id_too(gateway, org):
    response = await gateway.client.post("/v1/chat/completions", json=chat_body(stream=True),
                                         headers=auth(org["api_key"]))
    await response.read()
    [event] = [r.event for r in await gateway.events() if isinstance(r.event, RequestCompleted)]
    assert response.headers["X-Request-Id"] == event.request_id


async def test_stream_without_include_usage_sends_no_usage_chunk_but_is_billed(gateway, org):
    body = chat_body("a b [sim:tokens=4]", stream=True)
    response = await gateway.client.post("/v1/chat/completions", json=body, headers=auth(org["api_key"]))
    events = await sse_lines(response)
    assert all(orjson.loads(e)["choices"] for e in events[:-1])  # no choices-less usage chunk
    (event,) = await request_events(gateway)
    assert (event.status, event.completion_tokens, event.prompt_tokens) == (200, 4, prompt_tokens("a b [sim:tokens=4]"))
    assert event.charged_inr_nano == event.cost_inr_nano > 0


async def test_first_chunks_reach_client_while_upstream_is_still_generating(gateway, org, simulator):
    # The simulator sends two tokens and then hangs forever: the client can only see those
    # tokens if the gateway relays chunk by chunk instead of buffering the stream.
    body = chat_body("go [sim:hang_after=2]", stream=True)
    response = await gateway.client.post("/v1/chat/completions", json=body, headers=auth(org["api_key"]))
    received = b""
    while received.count(b"data: ") < 3:
        received += await asyncio.wait_for(response.content.readany(), 5)
    assert b'"content":"the "' in received and b'"content":"quick "' in received
    response.close()


async def test_client_disconnect_cancels_upstream_and_bills_delivered_tokens(gateway, org, simulator):
    body = chat_body("go [sim:hang_after=3]", stream=True)
    response = await gateway.client.post("/v1/chat/completions", json=body, headers=auth(org["api_key"]))
    received = b""
    while received.count(b"data: ") < 4:
        received += await asyncio.wait_for(response.content.readany(), 5)
    response.close()
    events = await poll(lambda: request_events(gateway))
    (event,) = events
    assert (event.status, event.completion_tokens) == (499, 3)
    assert event.charged_inr_nano == event.cost_inr_nano > 0
    outcome = await poll(lambda: _sim_outcome(gateway, simulator), lambda o: o == "disconnected")
    assert outcome == "disconnected"


async def _sim_outcome(gateway, simulator) -> str:
    recorded = await (await gateway.client.session.get(simulator.make_url("/_sim/requests"))).json()
    return recorded["data"][-1]["outcome"]


@pytest.mark.parametrize(("directive", "status"), [
    ("[sim:status=429]", 429), ("[sim:status=503]", 502), ("[sim:status=500]", 502),
    ("[sim:drop_after=0]", 502),
])
async def test_upstream_failures_become_gateway_errors_and_are_not_charged(make_gateway, config, directive, status):
    gateway = await make_gateway(single_attempt(config))
    org = await gateway.new_org("100")
    before = await gateway.balance(org["org_id"])
    response = await gateway.client.post("/v1/chat/completions", json=chat_body(f"x {directive}"),
                                         headers=auth(org["api_key"]))
    assert response.status == status
    error = (await response.json())["error"]
    assert error["type"] == error["code"] == "gateway_error"
    assert error["usedProvider"] == "openai" and error["requestedModel"] == "gpt-4o-mini"
    if status != 502 or "drop" not in directive:
        assert directive.split("=")[1].rstrip("]") in error["message"]  # the upstream status
    if status == 429:
        assert response.headers["Retry-After"] == "1"
    assert await gateway.balance(org["org_id"]) == before
    (event,) = await request_events(gateway)
    assert event.status == status and event.charged_inr_nano == 0 and event.error


async def test_upstream_silence_becomes_504(make_gateway, config, gateway_timeout_config):
    gateway = await make_gateway(gateway_timeout_config)
    org = await gateway.new_org("10")
    response = await gateway.client.post("/v1/chat/completions", json=chat_body("x [sim:hang]"),
                                         headers=auth(org["api_key"]))
    assert response.status == 504
    assert (await response.json())["error"]["type"] == "gateway_error"
    assert await gateway.balance(org["org_id"]) == Decimal(10)


async def test_stream_refused_upstream_is_an_ordinary_error_response(gateway, org):
    response = await gateway.client.post("/v1/chat/completions", json=chat_body("[sim:status=503]", stream=True),
                                         headers=auth(org["api_key"]))
    assert response.status == 502
    assert response.headers["Content-Type"].startswith("application/json")


async def test_stream_broken_by_upstream_ends_with_an_error_event_and_no_charge(gateway, org):
    response = await gateway.client.post("/v1/chat/completions", json=chat_body("[sim:drop_after=2]", stream=True),
                                         headers=auth(org["api_key"]))
    events = await sse_lines(response)
    assert events[-1] == b"[DONE]"
    assert orjson.loads(events[-2])["error"]["type"] == "gateway_error"
    (event,) = await request_events(gateway)
    assert event.status == 502 and event.charged_inr_nano == 0


@pytest.mark.parametrize(("body", "param", "fragment"), [
    ({"model": "tune-3-clip-preview", "messages": [{"role": "user", "content": "x"}]}, "model", "music"),
    ({"model": "text-embedding-3-small", "messages": [{"role": "user", "content": "x"}]}, "model", "embedding"),
    ({"model": "no-such-model", "messages": [{"role": "user", "content": "x"}]}, "model", "unknown model"),
    ({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "x"}], "max_tokens": 0}, "max_tokens", ">= 1"),
    ({"model": "gpt-4o-mini", "messages": []}, "messages", "length"),
    ({"messages": [{"role": "user", "content": "x"}]}, "model", "model"),
    ({"model": "gpt-4o-mini", "messages": "hi"}, "messages", "array"),
])
async def test_invalid_requests_are_400_naming_the_field(gateway, org, body, param, fragment):
    response = await gateway.client.post("/v1/chat/completions", json=body, headers=auth(org["api_key"]))
    assert response.status == 400
    error = (await response.json())["error"]
    assert error["param"] == param and fragment in error["message"]
    assert await request_events(gateway) == []  # nothing upstream, nothing recorded


async def test_body_that_is_not_json_is_400(gateway, org):
    response = await gateway.client.post("/v1/chat/completions", data=b"{not json",
                                         headers=auth(org["api_key"]))
    assert response.status == 400
    assert "not valid JSON" in (await response.json())["error"]["message"]


async def test_no_credit_left_is_402_without_upstream_call(gateway, simulator):
    org = await gateway.new_org("0")
    response = await gateway.client.post("/v1/chat/completions", json=chat_body(), headers=auth(org["api_key"]))
    assert response.status == 402
    assert (await response.json())["error"]["type"] == "insufficient_credits"
    recorded = await (await gateway.client.session.get(simulator.make_url("/_sim/requests"))).json()
    assert recorded["data"] == []
    [refusal] = await request_events(gateway)  # in the org's request log, with its reason, charged nothing
    assert (refusal.status, refusal.charged_inr_nano) == (402, 0) and "insufficient credits" in refusal.error


def with_catalogue_of(config, tmp_path, source: str, name: str, provider: str):
    """`config` whose catalogue is the shipped record `source`, renamed `name`, served by `provider`."""
    [record] = [r for r in json.loads(SHIPPED_PATH.read_text())["data"] if r["id"] == source]
    record = {**record, "id": name, "providers": [{**record["providers"][0], "providerId": provider}]}
    path = tmp_path / "catalogue.json"
    path.write_text(json.dumps({"data": [record]}))
    return msgspec.structs.replace(config, catalogue=msgspec.structs.replace(config.catalogue, path=str(path)))


async def test_a_catalogue_naming_a_provider_that_is_not_configured_stops_start_up(make_gateway, config, tmp_path):
    with pytest.raises(CatalogueError, match=r"'mistral-small'.*provider 'mistral' is not configured"):
        await make_gateway(with_catalogue_of(config, tmp_path, "gpt-4o-mini", "mistral-small", "mistral"))


async def test_a_model_whose_provider_speaks_no_protocol_for_its_kind_is_501(make_gateway, config, tmp_path):
    # An operator's catalogue may list an embedding model on a provider whose protocol has none.
    gateway = await make_gateway(with_catalogue_of(config, tmp_path, "text-embedding-3-small", "claude-embed",
                                                   "anthropic"))
    org = await gateway.new_org("1")
    response = await gateway.client.post("/v1/embeddings", json={"model": "claude-embed", "input": "hi"},
                                         headers=auth(org["api_key"]))
    assert response.status == 501
    assert "anthropic" in (await response.json())["error"]["message"]


@pytest.fixture
def gateway_timeout_config(config):
    openai = msgspec.structs.replace(config.providers["openai"], timeout_s=0.3)
    return msgspec.structs.replace(config, providers={**config.providers, "openai": openai})
