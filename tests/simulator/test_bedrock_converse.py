"""The simulator's Bedrock Converse route, driven by AWS's own botocore client: text, tools,
stop reasons, cache usage, model ids of every form, and errors as botocore names them."""

import base64
import struct
import zlib

import pytest
from botocore.exceptions import ClientError

from simulator.textgen import completion_text
from tests.simulator.test_bedrock_support import BEARER, SONNET, WEATHER, bedrock, call, sim_url, user
from tests.support import sim_records


def png(width: int, height: int) -> bytes:
    """A PNG header enough for the simulator to read the size from."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + ihdr + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))


async def test_text_answer_and_its_usage(make_client):
    client = await make_client()
    answer = await call(bedrock(sim_url(client)).converse, modelId=SONNET,
                        messages=user("one two three [sim:tokens=5]"), system=[{"text": "be brief"}],
                        inferenceConfig={"maxTokens": 100, "temperature": 0.5})
    assert answer["output"] == {"message": {"role": "assistant", "content": [{"text": completion_text(5)}]}}
    assert answer["stopReason"] == "end_turn"
    assert answer["usage"] == {"inputTokens": (2 + 4) + (4 + 4), "outputTokens": 5, "totalTokens": 19,
                               "cacheReadInputTokens": 0, "cacheWriteInputTokens": 0}
    assert answer["metrics"]["latencyMs"] >= 0
    assert answer["ResponseMetadata"]["HTTPHeaders"]["x-amzn-requestid"]
    record, = await sim_records(client)
    assert record["path"] == "/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse"
    assert record["body"]["system"] == [{"text": "be brief"}] and record["outcome"] == "completed"


async def test_cache_directives_move_tokens_out_of_input_tokens(make_client):
    client = await make_client()
    text = " ".join(["word"] * 40) + " [sim:cache_read=20] [sim:cache_write=10] [sim:tokens=3]"
    answer = await call(bedrock(sim_url(client)).converse, modelId=SONNET,
                        messages=[{"role": "user", "content": [{"text": text}, {"cachePoint": {"type": "default"}}]}])
    prompt = 40 + 3 + 4
    assert answer["usage"] == {"inputTokens": prompt - 30, "outputTokens": 3, "cacheReadInputTokens": 20,
                               "cacheWriteInputTokens": 10, "totalTokens": prompt + 3,
                               "cacheDetails": [{"ttl": "5m", "inputTokens": 10}]}


async def test_max_tokens_and_stop_sequences_end_the_answer(make_client):
    client = await make_client()
    converse = bedrock(sim_url(client)).converse
    capped = await call(converse, modelId=SONNET, messages=user("hi [sim:tokens=30]"), inferenceConfig={"maxTokens": 4})
    assert capped["stopReason"] == "max_tokens" and capped["usage"]["outputTokens"] == 4
    assert capped["output"]["message"]["content"] == [{"text": completion_text(4)}]
    stopped = await call(converse, modelId=SONNET, messages=user("hi [sim:tokens=30]"),
                         inferenceConfig={"stopSequences": ["fox"]})
    assert stopped["stopReason"] == "stop_sequence"
    assert stopped["output"]["message"]["content"] == [{"text": "the quick brown "}]


async def test_a_forced_tool_is_called_with_a_sample_input(make_client):
    client = await make_client()
    converse = bedrock(sim_url(client)).converse
    for choice in ({"tool": {"name": "get_weather"}}, {"any": {}}):
        answer = await call(converse, modelId=SONNET, messages=user("weather? [sim:tokens=2]"),
                            toolConfig={"tools": [WEATHER], "toolChoice": choice})
        text, tool = answer["output"]["message"]["content"]
        assert text == {"text": completion_text(2)} and answer["stopReason"] == "tool_use"
        assert tool["toolUse"]["toolUseId"].startswith("tooluse_")
        assert tool["toolUse"]["name"] == "get_weather"
        assert tool["toolUse"]["input"] == {"city": "the quick brown fox", "days": 7}
        assert answer["usage"]["outputTokens"] > 2  # the input's JSON fragments count too


async def test_the_tool_directive_names_the_tool_and_auto_calls_none(make_client):
    client = await make_client()
    converse = bedrock(sim_url(client)).converse
    auto = {"tools": [WEATHER], "toolChoice": {"auto": {}}}
    plain = await call(converse, modelId=SONNET, messages=user("hi"), toolConfig=auto)
    assert plain["stopReason"] == "end_turn"
    named = await call(converse, modelId=SONNET, messages=user("hi [sim:tool=get_weather]"), toolConfig=auto)
    assert named["stopReason"] == "tool_use"
    with pytest.raises(ClientError) as raised:
        await call(converse, modelId=SONNET, messages=user("hi [sim:tool=nope]"), toolConfig=auto)
    assert raised.value.response["Error"]["Code"] == "ValidationException"


async def test_tool_results_and_images_count_as_prompt(make_client):
    client = await make_client()
    messages = [
        {"role": "user", "content": [{"text": "look"},
                                     {"image": {"format": "png", "source": {"bytes": png(750, 100)}}}]},
        {"role": "assistant", "content": [{"toolUse": {"toolUseId": "t1", "name": "get_weather", "input": {}}}]},
        {"role": "user", "content": [{"toolResult": {"toolUseId": "t1", "status": "success",
                                                     "content": [{"text": "sunny and warm"}, {"json": {"c": 20}}]}}]},
    ]
    answer = await call(bedrock(sim_url(client)).converse, modelId=SONNET, messages=messages,
                        toolConfig={"tools": [WEATHER]})
    # text: (1 + 4) + (0 + 4) + (3 + 1 + 4); the image: 750 x 100 / 750 = 100 tokens (Anthropic's rule)
    assert answer["usage"]["inputTokens"] == 17 + 100
    record, = await sim_records(client)
    image = record["body"]["messages"][0]["content"][1]["image"]
    assert base64.b64decode(image["source"]["bytes"]) == png(750, 100)


@pytest.mark.parametrize("model_id", [
    "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/abc123",
    "global.anthropic.claude-sonnet-4-5-20250929-v1:0",
    "anthropic.claude-3-haiku-20240307-v1:0",
    "arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-3-haiku-20240307-v1:0",
])
async def test_model_ids_of_every_form_route(make_client, model_id):
    client = await make_client()
    answer = await call(bedrock(sim_url(client)).converse, modelId=model_id, messages=user("hi"))
    assert answer["stopReason"] == "end_turn"
    record, = await sim_records(client)
    assert "/" not in record["path"].removeprefix("/model/").removesuffix("/converse")  # sent encoded
    log, = (await (await client.get("/_sim/bedrock/requests")).json())["data"]
    assert log["model_id"] == model_id and log["operation"] == "Converse"


@pytest.mark.parametrize(("directive", "status", "code"), [
    ("status=400", 400, "ValidationException"), ("status=403", 403, "AccessDeniedException"),
    ("status=404", 404, "ResourceNotFoundException"), ("status=408", 408, "ModelTimeoutException"),
    ("status=424", 424, "ModelErrorException"), ("status=429", 429, "ThrottlingException"),
    ("status=500", 500, "InternalServerException"), ("status=503", 503, "ServiceUnavailableException"),
    ("aws_error=ModelNotReadyException", 429, "ModelNotReadyException"),
    ("aws_error=ServiceQuotaExceededException", 400, "ServiceQuotaExceededException"),
    ("error_after=1", 424, "ModelErrorException"),
    ("error_after=1][sim:stream_exception=throttlingException", 429, "ThrottlingException"),
])
async def test_error_directives_reach_botocore_by_aws_name(make_client, directive, status, code):
    client = await make_client()
    with pytest.raises(ClientError) as raised:
        await call(bedrock(sim_url(client)).converse, modelId=SONNET, messages=user(f"hi [sim:{directive}]"))
    response = raised.value.response
    assert response["Error"]["Code"] == code and response["ResponseMetadata"]["HTTPStatusCode"] == status
    assert response["Error"]["Message"]
    headers = response["ResponseMetadata"]["HTTPHeaders"]
    assert headers["x-amzn-errortype"] == f"{code}:http://internal.amazon.com/coral/com.amazon.bedrock/"
    assert headers["x-amzn-requestid"]
    assert [r["outcome"] for r in await sim_records(client)] == ["error"]


@pytest.mark.parametrize("body", [
    b"not json", b"[]", b'{"messages": "hi"}', b'{"messages": [{"role": "system", "content": [{"text": "x"}]}]}',
    b'{"messages": [{"role": "user", "content": [{"text": "a", "image": {}}]}]}',
    b'{"messages": [{"role": "user", "content": [{"text": "a"}]}], "inferenceConfig": {"maxTokens": 0}}',
    b'{"messages": [{"role": "user", "content": [{"text": "a"}]}], "bogus": 1}',
    b'{"messages": [{"role": "user", "content": [{"text": "[sim:nonsense]"}]}]}',
])
async def test_a_malformed_body_is_a_validation_exception(make_client, body):
    client = await make_client()
    response = await client.post(f"/model/{SONNET}/converse", data=body,
                                 headers={**BEARER, "Content-Type": "application/json"})
    assert response.status == 400
    assert response.headers["x-amzn-ErrorType"].startswith("ValidationException:")
    assert (await response.json())["message"]


async def test_documented_extra_fields_are_accepted(make_client):
    client = await make_client()
    answer = await call(bedrock(sim_url(client)).converse, modelId=SONNET, messages=user("hi"),
                        additionalModelRequestFields={"top_k": 5}, requestMetadata={"team": "a"},
                        performanceConfig={"latency": "standard"}, additionalModelResponseFieldPaths=["/x"])
    assert answer["stopReason"] == "end_turn"


async def test_an_empty_model_id_is_refused(make_client):
    client = await make_client()
    body = {"messages": user("hi")}
    for path in ("/model//converse", "/model/%20/converse"):
        response = await client.post(path, json=body, headers=BEARER)
        assert response.status == 400 and response.headers["x-amzn-ErrorType"].startswith("ValidationException")


async def test_content_filtered_stop_reason_on_demand(make_client):
    client = await make_client()
    answer = await call(bedrock(sim_url(client)).converse, modelId=SONNET,
                        messages=user("hi [sim:stop_reason=guardrail_intervened]"))
    assert answer["stopReason"] == "guardrail_intervened"
