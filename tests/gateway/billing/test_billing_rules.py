"""The billing rules stated once: whether a request is charged (Outcome.charged), and how every
route resolves its model (gateway.resolution): the same 400s and 501 on every route."""

import base64
import inspect
import json
import os
from decimal import Decimal
from typing import get_args

import msgspec
import pytest

from gateway.billing.charging import Outcome
from gateway.billing.pricing import Cost
from gateway.catalogue import SHIPPED_PATH, Kind
from gateway.providers import capabilities
from gateway.providers.capabilities import Providers
from tests.support import auth, decimal_json, request_events, transcription_form, upstream_requests

COST = Cost(1_000, 2_000, 252_000, Decimal("84"))
UPGRADE = {"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13"}
# A model of each kind the shipped catalogue has, and the route that serves it.
SAMPLE = {"chat": "gpt-4o-mini", "embedding": "text-embedding-3-small", "speech": "tts-1",
          "transcription": "whisper-1", "realtime": "gpt-4o-realtime-preview", "music": "tune-3-clip-preview"}
ROUTE_OF_KIND = {"chat": "POST /v1/chat/completions", "embedding": "POST /v1/embeddings",
                 "speech": "POST /v1/audio/speech", "transcription": "POST /v1/audio/transcriptions",
                 "realtime": "GET /v1/realtime", "music": "POST /v1/music"}
ROUTES = ["chat", "messages", "embedding", "speech", "transcription", "realtime", "music"]


def kind_of(route: str) -> str:
    return "chat" if route == "messages" else route


# -- whether a request is charged -----------------------------------------------------------------

def outcome(status: int, byok: bool = False) -> Outcome:
    return Outcome(route="/v1/chat/completions", model="m", provider="p", status=status, cost=COST, byok=byok)


@pytest.mark.parametrize("status", [200, 499])
def test_a_delivered_or_abandoned_request_is_charged_its_cost(status):
    assert outcome(status).charged and outcome(status).charged_inr_nano == COST.inr_nano


@pytest.mark.parametrize("status", [400, 402, 408, 422, 429, 500, 502, 503, 504])
def test_a_failed_request_is_recorded_but_not_charged(status):
    assert not outcome(status).charged and outcome(status).charged_inr_nano == 0


@pytest.mark.parametrize("status", [200, 499, 502])
def test_a_request_paid_with_the_organizations_own_key_is_never_charged(status):
    assert not outcome(status, byok=True).charged and outcome(status, byok=True).charged_inr_nano == 0


# -- the capability registry ----------------------------------------------------------------------

def test_the_registry_has_a_capability_for_every_kind_of_model():
    assert set(get_args(Kind)) <= set(Providers.__struct_fields__)


@pytest.mark.parametrize("capability", Providers.__struct_fields__)
def test_every_adapter_listed_under_a_capability_has_its_methods(config, capability):
    from gateway.providers import build

    protocol = {"chat": capabilities.ChatProvider, "messages": capabilities.MessagesProvider,
                "embedding": capabilities.EmbeddingProvider, "speech": capabilities.SpeechProvider,
                "transcription": capabilities.TranscriptionProvider, "realtime": capabilities.RealtimeProvider,
                "music": capabilities.MusicProvider, "completion": capabilities.CompletionProvider,
                "token_counting": capabilities.TokenCounter, "responses": capabilities.ResponsesProvider,
                "batch": capabilities.BatchProvider}[capability]
    methods = [name for name, value in vars(protocol).items() if inspect.iscoroutinefunction(value)]
    from gateway.providers.http import Upstream

    adapters = getattr(build(config.providers, upstream=Upstream(None, print)), capability)  # type: ignore[arg-type]
    assert adapters and methods
    for provider_id, adapter in adapters.items():
        assert adapter.id == provider_id
        assert all(inspect.iscoroutinefunction(getattr(adapter, name, None)) for name in methods)


# -- model resolution, the same on every route ----------------------------------------------------

async def send(gateway, key: str, route: str, model: str) -> tuple[int, dict]:
    """A minimal valid request for `route` naming `model`: its status and JSON body."""
    headers = auth(key)
    match route:
        case "chat":
            response = await gateway.client.post("/v1/chat/completions", headers=headers, json={
                "model": model, "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]})
        case "messages":
            response = await gateway.client.post("/v1/messages", headers=headers, json={
                "model": model, "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]})
        case "embedding":
            response = await gateway.client.post("/v1/embeddings", headers=headers, json={"model": model, "input": "x"})
        case "speech":
            response = await gateway.client.post("/v1/audio/speech", headers=headers,
                                                 json={"model": model, "input": "x", "voice": "alloy"})
        case "transcription":
            response = await gateway.client.post("/v1/audio/transcriptions", headers=headers,
                                                 data=transcription_form(b"\xff\xfb" * 64, model=model))
        case "realtime":
            upgrade = {**UPGRADE, "Sec-WebSocket-Key": base64.b64encode(os.urandom(16)).decode()}
            response = await gateway.client.get(f"/v1/realtime?model={model}", headers={**headers, **upgrade})
        case "music":
            response = await gateway.client.post("/v1/music", headers=headers, json={"model": model, "prompt": "x"})
    return response.status, decimal_json(await response.read())


async def nothing_happened(gateway, simulator) -> bool:
    return await upstream_requests(gateway, simulator) == [] and await request_events(gateway) == []


@pytest.mark.parametrize("route", ROUTES)
async def test_an_unknown_model_is_400_naming_it_on_every_route(gateway, org, simulator, route):
    status, body = await send(gateway, org["api_key"], route, "no-such-model")
    assert status == 400 and body["error"]["param"] == "model"
    assert body["error"]["message"].startswith("unknown model 'no-such-model'; ")
    assert await nothing_happened(gateway, simulator)


@pytest.mark.parametrize("route", ROUTES)
async def test_a_model_of_another_kind_is_400_naming_the_route_that_serves_it(gateway, org, simulator, route):
    other = "embedding" if kind_of(route) == "chat" else "chat"
    status, body = await send(gateway, org["api_key"], route, SAMPLE[other])
    assert status == 400 and body["error"]["param"] == "model"
    assert body["error"]["message"] == (f"model {SAMPLE[other]!r} is a {other} model, not a {kind_of(route)}"
                                        f" model; use {ROUTE_OF_KIND[other]}")
    assert await nothing_happened(gateway, simulator)


async def test_a_music_model_on_the_chat_route_points_to_the_music_route(gateway, org):
    status, body = await send(gateway, org["api_key"], "chat", SAMPLE["music"])
    assert status == 400 and body["error"]["message"].endswith("; use POST /v1/music")


@pytest.fixture
async def elsewhere(make_gateway, config, tmp_path):
    """A gateway whose catalogue also lists, for each kind, a model of a provider whose protocol has no
    adapter for it: `mistral`, configured as speaking Google's (chat and music only)."""
    shipped = json.loads(SHIPPED_PATH.read_text())["data"]
    extra = [{**record, "id": f"mistral-{record['id']}",
              "providers": [{**record["providers"][0], "providerId": "mistral"}]}
             for record in shipped if record["id"] in SAMPLE.values()]
    path = tmp_path / "catalogue.json"
    path.write_text(json.dumps({"data": shipped + extra}))
    mistral = msgspec.structs.replace(config.providers["google"], protocol="google")
    return await make_gateway(msgspec.structs.replace(
        config, catalogue=msgspec.structs.replace(config.catalogue, path=str(path)),
        providers={**config.providers, "mistral": mistral}))


@pytest.mark.parametrize("route", ["embedding", "speech", "transcription", "realtime"])
async def test_a_model_of_a_provider_without_the_capability_is_501_on_every_route(elsewhere, simulator, route):
    org = await elsewhere.new_org("100")
    model = f"mistral-{SAMPLE[kind_of(route)]}"
    status, body = await send(elsewhere, org["api_key"], route, model)
    assert status == 501 and body["error"]["code"] == "not_implemented"  # type: OpenAI's or Anthropic's
    assert body["error"]["message"] == (f"provider 'mistral' of model {model!r} cannot serve {kind_of(route)}"
                                        " requests in this gateway yet, or has no credentials or resource"
                                        " configured ([providers.mistral])")
    assert await nothing_happened(elsewhere, simulator)
