"""InvokeModel at the simulator for Bedrock's embedding models (Titan V2, Cohere Embed v3),
through botocore: the bodies, deterministic vectors, and the token-count headers."""

import math

import orjson
import pytest
from botocore.exceptions import ClientError

from tests.simulator.test_bedrock_support import BEARER, bedrock, call, sim_url
from tests.support import sim_records

TITAN = "amazon.titan-embed-text-v2:0"
COHERE = "cohere.embed-english-v3"


async def invoke(client, model_id: str, body: dict) -> tuple[dict, dict[str, str]]:
    """The decoded body and the HTTP headers of an InvokeModel answer."""
    def run() -> tuple[dict, dict[str, str]]:
        answer = bedrock(sim_url(client)).invoke_model(modelId=model_id, body=orjson.dumps(body),
                                                       contentType="application/json", accept="application/json")
        return orjson.loads(answer["body"].read()), answer["ResponseMetadata"]["HTTPHeaders"]
    return await call(run)


async def test_titan_v2_embeds_with_its_token_count(make_client):
    client = await make_client()
    body, headers = await invoke(client, TITAN, {"inputText": "the cat sat down"})
    assert len(body["embedding"]) == 1024 and body["embeddingsByType"]["float"] == body["embedding"]
    assert body["inputTextTokenCount"] == 4
    assert math.isclose(math.fsum(v * v for v in body["embedding"]), 1.0, rel_tol=1e-4)
    assert headers["x-amzn-bedrock-input-token-count"] == "4"
    assert headers["x-amzn-bedrock-output-token-count"] == "0"
    again, _ = await invoke(client, TITAN, {"inputText": "the cat sat down", "dimensions": 256, "normalize": True})
    assert len(again["embedding"]) == 256
    same, _ = await invoke(client, f"us.{TITAN}", {"inputText": "the cat sat down"})
    assert same["embedding"] == body["embedding"]  # deterministic: seeded from the text


async def test_cohere_embeds_several_texts_tokens_in_the_header_only(make_client):
    client = await make_client()
    texts = ["first text here", "second"]
    body, headers = await invoke(client, COHERE, {"texts": texts, "input_type": "search_document"})
    assert body["response_type"] == "embeddings_floats" and body["texts"] == texts and body["id"]
    assert [len(vector) for vector in body["embeddings"]] == [1024, 1024]
    assert body["embeddings"][0] != body["embeddings"][1]
    assert headers["x-amzn-bedrock-input-token-count"] == "4"
    assert "usage" not in body and "meta" not in body


async def test_cohere_embedding_types(make_client):
    client = await make_client()
    body, _ = await invoke(client, "cohere.embed-multilingual-v3", {
        "texts": ["hola"], "input_type": "search_query", "truncate": "END", "embedding_types": ["float", "int8"]})
    assert body["response_type"] == "embeddings_by_type"
    assert len(body["embeddings"]["float"][0]) == 1024
    assert all(-128 <= value <= 127 and isinstance(value, int) for value in body["embeddings"]["int8"][0])


@pytest.mark.parametrize(("model_id", "body"), [
    ("anthropic.claude-3-haiku-20240307-v1:0", {"inputText": "x"}),
    (TITAN, {"inputText": "x", "dimensions": 100}),
    (TITAN, {"texts": ["x"]}),
    (COHERE, {"texts": [], "input_type": "search_document"}),
    (COHERE, {"texts": ["x"]}),
])
async def test_other_models_and_bad_bodies_are_validation_exceptions(make_client, model_id, body):
    client = await make_client()
    with pytest.raises(ClientError) as raised:
        await invoke(client, model_id, body)
    assert raised.value.response["Error"]["Code"] == "ValidationException"
    assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400


@pytest.mark.parametrize(("directive", "code"), [("status=429", "ThrottlingException"),
                                                 ("aws_error=ModelNotReadyException", "ModelNotReadyException")])
async def test_error_directives_in_the_text(make_client, directive, code):
    client = await make_client()
    with pytest.raises(ClientError) as raised:
        await invoke(client, TITAN, {"inputText": f"hi [sim:{directive}]"})
    assert raised.value.response["Error"]["Code"] == code


async def test_a_bearer_key_works_on_invoke_too(make_client):
    client = await make_client()
    response = await client.post(f"/model/{TITAN}/invoke", json={"inputText": "a b"}, headers=BEARER)
    assert response.status == 200 and response.headers["X-Amzn-Bedrock-Input-Token-Count"] == "2"
    record, = await sim_records(client)
    assert record["body"] == {"inputText": "a b"} and record["outcome"] == "completed"
