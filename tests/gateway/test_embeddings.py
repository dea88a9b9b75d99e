"""POST /v1/embeddings through the gateway against the simulator (spec 2.4, 4.4)."""

import base64
import struct
from decimal import Decimal

import msgspec
import pytest

from gateway.edge.errors import UpstreamError
from gateway.providers.openai.adapter import embedding_reply
from simulator.openai_embeddings import vector
from tests.support import auth, decimal_json, request_events, upstream_requests

openai = pytest.importorskip("openai")

PRICE = Decimal("0.00000002")  # text-embedding-3-small, USD per prompt token
RATE = Decimal("84.0")
SMALL = "text-embedding-3-small"


@pytest.fixture
def client(gateway, org):
    return openai.AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=org["api_key"], max_retries=0)


async def post(gateway, org, **body):
    return await gateway.client.post("/v1/embeddings", json={"model": SMALL, **body}, headers=auth(org["api_key"]))


async def test_sdk_default_base64_and_explicit_float_agree(client):
    decoded = await client.embeddings.create(model=SMALL, input="the cat sat on the mat")  # asks for base64
    floats = await client.embeddings.create(model=SMALL, input="the cat sat on the mat", encoding_format="float")
    assert decoded.data[0].embedding == floats.data[0].embedding == vector("the cat sat on the mat", 1536)
    assert decoded.usage.prompt_tokens == floats.usage.prompt_tokens == 6


async def test_response_is_spec_2_4_with_exact_cost_charged(gateway, org):
    response = await post(gateway, org, input="one two three four")
    body = decimal_json(await response.read())
    assert response.status == 200
    assert set(body) == {"id", "object", "data", "model", "usage"}
    assert body["object"] == "list" and body["model"] == SMALL and body["id"] == response.headers["X-Request-Id"]
    assert [(d["object"], d["index"], len(d["embedding"])) for d in body["data"]] == [("embedding", 0, 1536)]
    cost = 4 * PRICE
    assert body["usage"] == {"prompt_tokens": 4, "total_tokens": 4, "cost": cost, "cost_inr": cost * RATE,
                             "usd_to_inr": RATE}
    assert await gateway.balance(org["org_id"]) == Decimal(100) - cost * RATE
    (event,) = await request_events(gateway)
    assert (event.route, event.model, event.status, event.prompt_tokens) == ("/v1/embeddings", SMALL, 200, 4)
    assert event.charged_inr_nano == event.cost_inr_nano > 0


async def test_upstream_is_asked_for_floats_and_base64_is_made_by_the_gateway(gateway, org, simulator):
    response = await post(gateway, org, input=["alpha", "beta gamma"], encoding_format="base64", dimensions=8,
                          user="u-1")
    body = await response.json()
    (sent,) = await upstream_requests(gateway, simulator)
    assert sent["path"] == "/v1/embeddings"
    assert sent["body"] == {"model": SMALL, "input": ["alpha", "beta gamma"], "encoding_format": "float",
                            "dimensions": 8, "user": "u-1"}
    assert sent["headers"]["authorization"].startswith("Bearer sk-sim-provider")
    for item, text in zip(body["data"], ["alpha", "beta gamma"], strict=True):
        assert list(struct.unpack("<8f", base64.b64decode(item["embedding"]))) == vector(text, 8)
    assert body["usage"]["prompt_tokens"] == 3


async def test_sdk_dimensions_and_list_input(client):
    reply = await client.embeddings.create(model="openai/text-embedding-3-large", input=["a", "b", "c"],
                                           dimensions=16)
    assert [item.index for item in reply.data] == [0, 1, 2]
    assert [len(item.embedding) for item in reply.data] == [16, 16, 16]
    assert reply.model == "text-embedding-3-large"


async def test_token_array_input_passes_through(gateway, org, simulator):
    response = await post(gateway, org, input=[[10, 20, 30]])
    assert (await response.json())["usage"]["prompt_tokens"] == 3
    assert (await upstream_requests(gateway, simulator))[0]["body"]["input"] == [[10, 20, 30]]


@pytest.mark.parametrize(("body", "param"), [
    ({"input": "x", "dimensions": 0}, "dimensions"),
    ({"input": "x", "dimensions": -3}, "dimensions"),
    ({"input": ""}, "input"),
    ({"input": []}, "input"),
    ({"input": ["a", ""]}, "input"),
    ({"input": ["a", 5]}, "input"),
    ({"input": ["x"] * 2049}, "input"),
    ({"input": "x", "encoding_format": "hex"}, "encoding_format"),
    ({"input": "x", "model": "gpt-4o-mini"}, "model"),
    ({"input": "x", "model": "whisper-1"}, "model"),
    ({"input": "x", "model": "no-such-model"}, "model"),
    ({"model": SMALL}, "input"),
])
async def test_invalid_requests_are_400_naming_the_field_without_upstream_call(gateway, org, simulator, body, param):
    response = await post(gateway, org, **body)
    assert response.status == 400
    assert (await response.json())["error"]["param"] == param
    assert await upstream_requests(gateway, simulator) == []
    assert await request_events(gateway) == []


@pytest.mark.parametrize(("directive", "status"), [
    ("[sim:status=429]", 429), ("[sim:status=503]", 502), ("[sim:status=401]", 502), ("[sim:drop_after=0]", 502),
])
async def test_upstream_failures_become_gateway_errors_and_are_not_charged(gateway, org, directive, status):
    response = await post(gateway, org, model=f"openai/{SMALL}", input=f"x {directive}")  # not Azure's as well
    assert response.status == status
    error = (await response.json())["error"]
    assert (error["type"], error["usedProvider"], error["requestedModel"]) == ("gateway_error", "openai",
                                                                               f"openai/{SMALL}")
    assert "sk-sim-provider" not in error["message"]
    assert await gateway.balance(org["org_id"]) == Decimal(100)
    (event,) = await request_events(gateway)
    assert (event.status, event.charged_inr_nano) == (status, 0)


async def test_upstream_silence_is_504(make_gateway, config):
    openai_config = msgspec.structs.replace(config.providers["openai"], timeout_s=0.3)
    gateway = await make_gateway(msgspec.structs.replace(
        config, providers={**config.providers, "openai": openai_config}))
    org = await gateway.new_org("10")
    response = await post(gateway, org, input="x [sim:hang]")
    assert response.status == 504
    assert await gateway.balance(org["org_id"]) == Decimal(10)


async def test_no_credit_is_402_without_upstream_call(gateway, simulator):
    org = await gateway.new_org("0")
    assert (await post(gateway, org, input="x")).status == 402
    assert await upstream_requests(gateway, simulator) == []


async def test_sdk_sees_errors_as_typed_exceptions(client):
    with pytest.raises(openai.BadRequestError):
        await client.embeddings.create(model=SMALL, input="x", dimensions=0)
    with pytest.raises(openai.RateLimitError):
        await client.embeddings.create(model=SMALL, input="x [sim:status=429]")


def test_an_upstream_answering_base64_anyway_is_decoded_in_index_order():
    packed = [base64.b64encode(struct.pack("<2f", *values)).decode() for values in ([0.5, -0.25], [1.0, 2.0])]
    reply = embedding_reply({"data": [{"index": 1, "embedding": packed[1]}, {"index": 0, "embedding": packed[0]}],
                             "usage": {"prompt_tokens": 7}})
    assert reply.vectors == [[0.5, -0.25], [1.0, 2.0]] and reply.prompt_tokens == 7


@pytest.mark.parametrize("body", [{}, {"data": [{"index": 0, "embedding": "###"}]},
                                  {"data": [{"index": 0, "embedding": ["a"]}]},
                                  {"data": [{"index": 0, "embedding": "AAA="}]}])
def test_a_malformed_upstream_answer_is_an_upstream_failure(body):
    with pytest.raises(UpstreamError) as raised:
        embedding_reply(body)
    assert raised.value.client_status() == 502


async def test_a_null_encoding_format_means_floats(gateway, org, simulator):
    response = await post(gateway, org, input="alpha", encoding_format=None)  # as litellm sends it
    assert response.status == 200, await response.text()
    assert isinstance((await response.json())["data"][0]["embedding"], list)
    (sent,) = await upstream_requests(gateway, simulator)
    assert sent["body"]["encoding_format"] == "float"
