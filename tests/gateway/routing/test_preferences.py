"""Choosing among a model's providers: the configured strategy (priority, price, latency) and a
request's own `provider` object (OpenRouter's, sent through the SDKs' extra_body)."""

import msgspec
import openai
import pytest

from tests.support import auth


def sdk(duo) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=f"{duo.gateway.url}/v1", api_key=duo.org["api_key"], max_retries=0)


async def answered_by(duo, **extra) -> str:
    response = await duo.chat(**extra)
    assert response.status == 200, await response.text()
    return response.headers["X-Gateway-Provider"]


async def test_priority_is_the_catalogues_order(duo):
    assert [await answered_by(duo) for _ in range(3)] == ["sim-a"] * 3


async def test_price_routing_prefers_the_cheaper_provider(make_duo):
    duo = await make_duo(strategy="price")
    assert await answered_by(duo) == "sim-b"
    await duo.b.outage("503")
    assert await answered_by(duo) == "sim-a"  # and fails over to the dearer one


async def test_latency_routing_learns_which_provider_is_faster(make_duo):
    duo = await make_duo({"latency_ms": 150}, strategy="latency")
    first = await answered_by(duo)  # neither measured yet: the catalogue's order
    assert first == "sim-a"
    assert [await answered_by(duo) for _ in range(3)] == ["sim-b"] * 3


async def test_the_provider_object_through_the_sdks_extra_body(duo):
    client = sdk(duo)
    raw = await client.chat.completions.with_raw_response.create(
        model="duo-chat", messages=[{"role": "user", "content": "hi"}], extra_body={"provider": {"order": ["sim-b"]}})
    assert raw.headers["X-Gateway-Provider"] == "sim-b" and raw.parse().choices[0].message.content
    assert "provider" not in (await duo.b.last())["body"]  # the gateway's field, never sent upstream


@pytest.mark.parametrize(("preferences", "provider"), [
    ({"order": ["sim-b", "sim-a"]}, "sim-b"),
    ({"ignore": ["sim-a"]}, "sim-b"),
    ({"only": ["sim-b"]}, "sim-b"),
    ({"sort": "price"}, "sim-b"),
    ({"sort": "priority"}, "sim-a"),
])
async def test_the_provider_object_chooses(duo, preferences, provider):
    assert await answered_by(duo, provider=preferences) == provider


@pytest.mark.parametrize("preferences", [{"only": ["sim-a"]}, {"allow_fallbacks": False},
                                         {"order": ["sim-a"], "allow_fallbacks": False}])
async def test_the_provider_object_can_forbid_failover(duo, preferences):
    await duo.a.outage("503")
    response = await duo.chat(provider=preferences)
    assert response.status == 502 and await duo.calls() == (1, 0)


@pytest.mark.parametrize(("preferences", "words"), [
    ({"only": ["nobody"]}, "leave no provider for model 'duo-chat'; it is served by sim-a, sim-b"),
    ({"sort": "throughput"}, "invalid provider preferences"),
    ({"order": "sim-a"}, "invalid provider preferences"),
    ({"data_collection": "deny"}, "data_collection"),
    ("sim-a", "invalid provider preferences"),
])
async def test_a_malformed_provider_object_is_a_400_naming_it(duo, preferences, words):
    response = await duo.chat(provider=preferences)
    body = await response.json()
    assert response.status == 400 and body["error"]["param"] == "provider"
    assert words in body["error"]["message"]
    assert await duo.calls() == (0, 0)


async def test_the_shipped_catalogue_serves_gpt_oss_on_groq_then_openrouter(make_gateway, config, simulator):
    dead = msgspec.structs.replace(config.providers["groq"], base_url="http://127.0.0.1:1/v1")  # nothing listens
    gateway = await make_gateway(msgspec.structs.replace(config, providers={**config.providers, "groq": dead}))
    org = await gateway.new_org("10")
    body = {"model": "gpt-oss-120b", "messages": [{"role": "user", "content": "hi"}]}
    response = await gateway.client.post("/v1/chat/completions", json=body, headers=auth(org["api_key"]))
    assert response.status == 200 and response.headers["X-Gateway-Provider"] == "openrouter"
    [upstream] = (await (await gateway.client.session.get(simulator.make_url("/_sim/requests"))).json())["data"]
    assert upstream["body"]["model"] == "openai/gpt-oss-120b"  # openrouter's own name for it
    pinned = await gateway.client.post("/v1/chat/completions", json={**body, "model": "groq/gpt-oss-120b"},
                                       headers=auth(org["api_key"]))
    assert pinned.status == 502 and (await pinned.json())["error"]["usedProvider"] == "groq"


async def test_a_providers_extra_headers_and_query_go_with_every_request(make_gateway, config, simulator):
    azure = msgspec.structs.replace(config.providers["openai"], api_key="", headers={"api-key": "az-key-0123456789"},
                                    query={"api-version": "2024-10-21"})
    gateway = await make_gateway(msgspec.structs.replace(config, providers={**config.providers, "openai": azure}))
    org = await gateway.new_org("10")
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
    for stream in (False, True):
        response = await gateway.client.post("/v1/chat/completions", json={**body, "stream": stream},
                                             headers=auth(org["api_key"]))
        assert response.status == 502  # the simulator wants a bearer key (its 401); what matters is what it got
    records = (await (await gateway.client.session.get(simulator.make_url("/_sim/requests"))).json())["data"]
    assert len(records) == 2
    for record in records:
        assert record["headers"]["api-key"] == "az-key-0123456789" and "authorization" not in record["headers"]
        assert record["query"] == {"api-version": "2024-10-21"}
    logged = await (await gateway.client.get("/v1/logs?limit=5", headers=auth(org["api_key"]))).text()
    assert "az-key-0123456789" not in logged
