"""The attack on the worst cases, over HTTP against the simulator: each hostile body held less than
its answer cost (the charge is the true cost all the same, with an anomaly recorded). Now each
holds at least its true cost: its RequestCompleted carries no anomaly and charges its cost.

Holds are taken per request or from an escrow slice; either way the anomaly says whether the
request's true cost passed what it held, so the tests read that, not the holds."""

import asyncio
from decimal import Decimal

from tests.support import auth, chat_body, poll, request_events, ws_receive

from ledger.events import RequestCompleted


async def post(gateway, key: str, path: str, body: dict) -> dict:
    response = await gateway.client.post(path, json=body, headers=auth(key))
    assert response.status == 200, await response.text()
    return await response.json()


async def recorded(gateway) -> RequestCompleted:
    [event] = await poll(lambda: request_events(gateway), bool)
    return event


def held_its_cost(event: RequestCompleted) -> None:
    assert event.status == 200 and event.cost_inr_nano > 0, event
    assert event.anomaly == "" and event.charged_inr_nano == event.cost_inr_nano, event


async def test_messages_translated_for_openai_holds_the_max_tokens_it_sends_not_max_completion_tokens(gateway, org):
    body = {"model": "gpt-4o-mini", "max_tokens": 16_384, "max_completion_tokens": 1,
            "messages": [{"role": "user", "content": "go [sim:tokens=16384]"}]}
    answer = await post(gateway, org["api_key"], "/v1/messages", body)
    assert answer["usage"]["output_tokens"] == 16_384
    held_its_cost(await recorded(gateway))


async def test_chat_holds_the_models_output_limit_when_it_sends_no_limit_of_chats(gateway, org):
    body = chat_body("go [sim:tokens=2000]", max_output_tokens=1)  # not a chat field: not sent as a limit
    answer = await post(gateway, org["api_key"], "/v1/chat/completions", body)
    assert answer["usage"]["completion_tokens"] == 2_000
    held_its_cost(await recorded(gateway))


async def test_responses_hold_what_max_output_tokens_allows_not_max_tokens(gateway, org):
    body = {"model": "gpt-4o-mini", "input": "go [sim:tokens=2000]", "max_tokens": 1}
    answer = await post(gateway, org["api_key"], "/v1/responses", body)
    assert answer["usage"]["output_tokens"] == 2_000
    held_its_cost(await recorded(gateway))


async def test_embeddings_hold_a_context_for_each_input(gateway, org):
    body = {"model": "text-embedding-3-small", "input": ["x " * 4_000] * 3}  # 12,000 tokens: past one context
    answer = await post(gateway, org["api_key"], "/v1/embeddings", body)
    assert answer["usage"]["prompt_tokens"] == 12_000
    held_its_cost(await recorded(gateway))


async def test_completions_hold_every_prompts_answer(gateway, org):
    body = {"model": "gpt-3.5-turbo-instruct", "prompt": ["go [sim:tokens=500]"] * 8, "max_tokens": 500}
    answer = await post(gateway, org["api_key"], "/v1/completions", body)
    assert answer["usage"]["completion_tokens"] == 8 * 500
    held_its_cost(await recorded(gateway))


async def new_key(gateway, org: dict, budget_inr: str) -> dict:
    response = await gateway.client.post("/v1/keys", json={"name": "budgeted", "budget_inr": budget_inr},
                                         headers=auth(org["api_key"]))
    assert response.status == 201, await response.text()
    return await response.json()


async def test_completions_hold_every_best_of_candidate(gateway, org):
    # best_of 5 candidates of 4,000 tokens are generated and billed: 20,000 tokens at 0.000168 INR,
    # 3.36 INR. A key with 2 INR left cannot hold that (one candidate, 0.67 INR, it could).
    key = await new_key(gateway, org, "2")
    body = {"model": "gpt-3.5-turbo-instruct", "prompt": "go", "max_tokens": 4_000}
    refused = await gateway.client.post("/v1/completions", json={**body, "best_of": 5}, headers=auth(key["api_key"]))
    assert refused.status == 402 and (await refused.json())["error"]["code"] == "key_budget_exceeded"
    assert (await gateway.client.post("/v1/completions", json=body, headers=auth(key["api_key"]))).status == 200


async def test_realtime_holds_every_queued_response_and_refuses_those_that_do_not_fit(gateway, org):
    # Twelve responses asked for at once, 600 tokens each (0.4 s: all are asked for before the
    # first is done) and each reading the answers before it, cost about 29 INR; a session checking
    # each against one more response let them all in on a budget of 20. Holding every pending
    # one, it lets in what fits and refuses the rest.
    key = await new_key(gateway, org, "20")
    ws = await gateway.client.ws_connect("/v1/realtime?model=gpt-4o-realtime-preview",
                                         headers={**auth(key["api_key"]), "OpenAI-Beta": "realtime=v1"})
    assert (await ws_receive(ws))["type"] == "session.created"
    await ws.send_json({"type": "session.update", "session": {"modalities": ["text"]}})
    for n in range(12):
        text = f"q{n} [sim:tokens=600] [sim:tps=1500]"
        await ws.send_json({"type": "conversation.item.create", "item": {
            "type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}})
        await ws.send_json({"type": "response.create"})
    done, refused = await answered(ws, 12)
    await ws.close()
    held_its_cost(await recorded(gateway))
    keys = await (await gateway.client.get("/v1/keys", headers=auth(org["api_key"]))).json()
    [item] = [item for item in keys["data"] if item["id"] == key["id"]]
    assert Decimal(str(item["spent_inr"])) <= 20 and done >= 1 and refused >= 1


async def answered(ws, asked: int) -> tuple[int, int]:
    """Read the session until each of `asked` response.creates has its response.done or its refusal."""
    done = refused = 0
    while done + refused < asked:
        event = await asyncio.wait_for(ws_receive(ws), 10)
        done += event["type"] == "response.done"
        refused += event["type"] == "error" and event["error"]["code"] == "key_budget_exceeded"
    return done, refused
