"""Bedrock as its users meet it through the gateway: the official openai and anthropic SDKs,
tools and JSON answers, the event stream failing mid-way, AWS's errors and failover across the
clouds, the credential chain renewed before it lapses, and no AWS secret anywhere it could leak."""

import asyncio
import json

import anthropic
import msgspec
import openai
import orjson
import pytest
from aiohttp import web

from gateway.catalogue import Catalogue
from gateway.providers.bedrock.events import ConverseChunks
from ledger.events import RequestCompleted
from simulator.cloud_credentials import AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN
from tests.gateway.providers.test_bedrock import aws_env, bedrock_calls, with_bedrock  # noqa: F401 (a fixture)
from tests.support import auth, sse_lines

SONNET = "bedrock/claude-sonnet-4-5"


async def charges(gateway) -> list[RequestCompleted]:
    return [r.event for r in await gateway.events() if isinstance(r.event, RequestCompleted)]


def sdk(gateway, org) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=gateway.url + "/v1", api_key=org["api_key"], max_retries=0)


async def test_the_openai_sdk_streams_a_bedrock_model_with_its_usage(gateway, org):
    stream = await sdk(gateway, org).chat.completions.create(
        model=SONNET, max_tokens=40, stream=True, stream_options={"include_usage": True},
        messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi [sim:tokens=4]"}])
    chunks = [chunk async for chunk in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert len(text.split()) == 4
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 4
    (event,) = await charges(gateway)
    assert event.provider == "bedrock" and event.stream and event.charged_inr_nano > 0


async def test_tools_round_trip_through_converse(gateway, org, simulator):
    parameters = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    function = {"name": "get_weather", "description": "Weather", "parameters": parameters}
    tools = [{"type": "function", "function": function}]
    client = sdk(gateway, org)
    first = await client.chat.completions.create(model=SONNET, max_tokens=40, tools=tools, tool_choice="required",
                                                 messages=[{"role": "user", "content": "weather?"}])
    call = first.choices[0].message.tool_calls[0]
    assert first.choices[0].finish_reason == "tool_calls" and call.function.name == "get_weather"
    assert "city" in json.loads(call.function.arguments)
    second = await client.chat.completions.create(model=SONNET, max_tokens=40, tools=tools, messages=[
        {"role": "user", "content": "weather?"}, first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "sunny"}])
    assert second.choices[0].message.content
    sent = [r for r in (await (await gateway.client.session.get(simulator.make_url("/_sim/requests"))).json())["data"]
            if r["path"].startswith("/model/")][-1]["body"]
    assert sent["toolConfig"]["tools"][0]["toolSpec"]["name"] == "get_weather"
    assert [b["toolUse"]["toolUseId"] for b in sent["messages"][1]["content"] if "toolUse" in b] == [call.id]
    assert sent["messages"][2]["content"][0]["toolResult"] == {"toolUseId": call.id, "content": [{"text": "sunny"}]}


async def test_a_json_schema_answer_comes_back_as_the_message_text(gateway, org):
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    for stream in (False, True):
        response = await gateway.client.post("/v1/chat/completions", headers=auth(org["api_key"]), json={
            "model": SONNET, "max_tokens": 40, "stream": stream, "messages": [{"role": "user", "content": "q"}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": schema}}})
        if stream:
            chunks = [orjson.loads(line) for line in (await sse_lines(response))[:-1]]
            text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
            assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "stop"
        else:
            choice = (await response.json())["choices"][0]
            text, finish = choice["message"]["content"], choice["finish_reason"]
            assert finish == "stop" and "tool_calls" not in choice["message"]
        assert "answer" in json.loads(text)


async def test_the_anthropic_sdk_reaches_bedrock_through_messages(gateway, org):
    client = anthropic.AsyncAnthropic(base_url=gateway.url, api_key=org["api_key"], max_retries=0)
    message = await client.messages.create(model=SONNET, max_tokens=30, messages=[{"role": "user", "content": "x"}])
    assert message.content[0].text and message.stop_reason == "end_turn"
    async with client.messages.stream(model="bedrock/claude-haiku-4-5", max_tokens=30,
                                      messages=[{"role": "user", "content": "y [sim:tokens=3]"}]) as stream:
        final = await stream.get_final_message()
    assert final.usage.output_tokens == 3
    assert [e.provider for e in await charges(gateway)] == ["bedrock", "bedrock"]


async def test_responses_reach_a_bedrock_model(gateway, org):
    answer = await sdk(gateway, org).responses.create(model=SONNET, input="hello [sim:tokens=2]", max_output_tokens=20)
    assert answer.output_text and answer.usage.output_tokens == 2


@pytest.mark.parametrize("exception", ["throttlingException", "modelStreamErrorException", "internalServerException"])
async def test_an_exception_mid_stream_ends_the_clients_stream_and_charges_nothing(gateway, org, exception):
    response = await gateway.client.post("/v1/chat/completions", headers=auth(org["api_key"]), json={
        "model": SONNET, "max_tokens": 40, "stream": True,
        "messages": [{"role": "user", "content": f"x [sim:error_after=2] [sim:stream_exception={exception}]"}]})
    lines = await sse_lines(response)
    assert lines[-1] == b"[DONE]"
    error = orjson.loads(lines[-2])["error"]
    assert error["type"] == "gateway_error" and exception[0].upper() + exception[1:] in error["message"]
    assert "charged" in error["message"] or "nothing" in error["message"] or error["message"]
    (event,) = await charges(gateway)
    assert event.status != 200 and event.charged_inr_nano == 0


@pytest.mark.parametrize(("name", "status"), [
    ("ThrottlingException", 429), ("ModelTimeoutException", 504), ("ValidationException", 400),
    ("ServiceUnavailableException", 502), ("ModelNotReadyException", 502), ("AccessDeniedException", 502),
    ("InternalServerException", 502), ("ModelErrorException", 502)])
async def test_aws_errors_map_onto_the_gateways_statuses(gateway, org, name, status):
    response = await gateway.client.post("/v1/chat/completions", headers=auth(org["api_key"]), json={
        "model": "bedrock/" + "global.anthropic.claude-sonnet-4-5-20250929-v1:0", "max_tokens": 20,
        "messages": [{"role": "user", "content": f"x [sim:aws_error={name}]"}]})
    body = await response.json()
    assert response.status == status, body
    assert name in body["error"]["message"] and body["error"]["type"] in ("gateway_error", "invalid_request_error")
    assert all(e.charged_inr_nano == 0 for e in await charges(gateway))


async def test_claude_fails_over_from_anthropic_to_bedrock_to_vertex_billed_once_where_it_answered(
        make_gateway, config, sim_url):
    """Anthropic and Bedrock unreachable: the request is answered by Vertex, charged once, at
    Vertex's price, its attempts naming all three."""
    closed = "http://127.0.0.1:9"
    providers = {**config.providers,
                 "anthropic": msgspec.structs.replace(config.providers["anthropic"], base_url=closed),
                 "bedrock": msgspec.structs.replace(config.providers["bedrock"], base_url=closed)}
    gateway = await make_gateway(msgspec.structs.replace(config, providers=providers))
    org = await gateway.new_org()
    response = await gateway.client.post("/v1/chat/completions", headers=auth(org["api_key"]), json={
        "model": "claude-sonnet-4-5", "max_tokens": 20, "messages": [{"role": "user", "content": "x [sim:tokens=2]"}]})
    body = await response.json()
    assert response.status == 200, body
    (event,) = await charges(gateway)
    assert event.provider == "vertex" and [a.provider for a in event.attempts] == ["anthropic", "bedrock", "vertex"]
    vertex = Catalogue.load().resolve("vertex/claude-sonnet-4-5").prices.per_token
    assert event.priced is not None and event.priced.prompt_usd == vertex.prompt_usd


async def test_a_request_without_max_tokens_to_claude_on_bedrock_is_refused_first(gateway, org, simulator):
    response = await gateway.client.post("/v1/chat/completions", headers=auth(org["api_key"]), json={
        "model": SONNET, "messages": [{"role": "user", "content": "x"}]})
    assert response.status == 400 and (await response.json())["error"]["param"] == "max_tokens"
    assert await bedrock_calls(gateway, simulator) == []


@pytest.fixture
async def container_credentials(simulator, monkeypatch, aws_env):  # noqa: F811 (aws_env: the fixture)
    """The credential chain's container source at the simulator, instead of the environment's keys."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", str(simulator.make_url("/_sim/aws/credentials")))
    return simulator


async def issued(gateway, simulator) -> int:
    answer = await gateway.client.session.get(simulator.make_url("/_sim/aws/credentials/issued"))
    return (await answer.json())["issued"]


async def lifetime(gateway, simulator, seconds: float) -> None:
    await gateway.client.session.post(simulator.make_url("/_sim/aws/credentials/lifetime"), json={"seconds": seconds})


async def test_temporary_credentials_are_fetched_once_and_renewed_before_they_lapse(
        make_gateway, config, container_credentials):
    simulator = container_credentials
    gateway = await make_gateway(with_bedrock(config, api_key=""))
    org = await gateway.new_org()

    async def ask() -> None:
        response = await gateway.client.post("/v1/chat/completions", headers=auth(org["api_key"]), json={
            "model": SONNET, "max_tokens": 10, "messages": [{"role": "user", "content": "x [sim:tokens=1]"}]})
        assert response.status == 200, await response.text()

    await lifetime(gateway, simulator, 906)  # seconds later, inside botocore's 15-minute renewal window
    await asyncio.gather(*(ask() for _ in range(5)))
    assert await issued(gateway, simulator) == 1  # a burst shares one lookup
    await lifetime(gateway, simulator, 3600)
    await asyncio.sleep(7)  # the first credentials now lapse within 15 minutes, still good for 14
    for _ in range(5):
        await ask()
    assert await issued(gateway, simulator) == 2  # renewed once, before they lapsed
    assert {call["auth"] for call in await bedrock_calls(gateway, simulator)} == {"sigv4"}


async def test_a_credential_chain_that_fails_is_a_clean_502(make_gateway, config, monkeypatch):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_BEARER_TOKEN_BEDROCK",
                 "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_PROFILE", "no-such-profile")  # a source named, but not there
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/config")
    gateway = await make_gateway(with_bedrock(config, api_key=""))
    org = await gateway.new_org()
    response = await gateway.client.post("/v1/chat/completions", headers=auth(org["api_key"]), json={
        "model": SONNET, "max_tokens": 10, "messages": [{"role": "user", "content": "x"}]})
    body = await response.json()
    assert response.status == 502 and "AWS credentials" in body["error"]["message"]
    assert "no-such-profile" in body["error"]["message"]


async def test_no_aws_secret_reaches_a_client_the_log_the_metrics_or_the_ledger(
        make_gateway, config, aws_env, monkeypatch, capsys, simulator):  # noqa: F811 (aws_env: the fixture)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong" + AWS_SECRET_ACCESS_KEY)  # refused: InvalidSignature
    gateway = await make_gateway(with_bedrock(config, api_key=""))
    org = await gateway.new_org()
    response = await gateway.client.post("/v1/chat/completions", headers=auth(org["api_key"]), json={
        "model": SONNET, "max_tokens": 10, "messages": [{"role": "user", "content": "x"}]})
    text = await response.text()
    assert response.status == 502 and "InvalidSignatureException" in text
    records = json.dumps([msgspec.to_builtins(r.event) for r in await gateway.events()])
    metrics = await (await gateway.client.get("/metrics")).text()
    seen = text + capsys.readouterr().out + records + metrics
    for secret in (AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, "wrong" + AWS_SECRET_ACCESS_KEY):
        assert secret not in seen


def test_stream_chunks_never_start_a_tool_call_for_an_unknown_block():
    chunks = ConverseChunks("c", "m", 0, as_json=False)
    with pytest.raises(Exception, match="never started"):
        chunks.feed("contentBlockDelta", {"contentBlockIndex": 3, "delta": {"toolUse": {"input": "{"}}})


async def test_a_broken_event_stream_frame_is_a_clean_failure(make_gateway, config, aiohttp_server):
    """A lying upstream: a frame whose CRC does not match ends the request with a 502, no charge."""
    async def corrupt(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/vnd.amazon.eventstream"})
        await response.prepare(request)
        await response.write(b"\x00\x00\x00\x20\x00\x00\x00\x00" + b"\xde\xad\xbe\xef" + b"x" * 20)
        return response
    app = web.Application()
    app.router.add_post("/model/{rest:.*}", corrupt)
    liar = await aiohttp_server(app)
    gateway = await make_gateway(with_bedrock(config, base_url=str(liar.make_url("")).rstrip("/")))
    org = await gateway.new_org()
    response = await gateway.client.post("/v1/chat/completions", headers=auth(org["api_key"]), json={
        "model": "bedrock/" + "global.anthropic.claude-sonnet-4-5-20250929-v1:0", "max_tokens": 10, "stream": True,
        "messages": [{"role": "user", "content": "x"}]})
    assert response.status == 502
    assert "broken event stream" in (await response.json())["error"]["message"]
    (event,) = await charges(gateway)
    assert event.charged_inr_nano == 0


PNG_1PX = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")


async def test_an_image_goes_as_converse_bytes_and_an_image_url_is_refused_before_any_call(gateway, org, simulator):
    content = [{"type": "text", "text": "what is it?"},
               {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_1PX}"}}]
    response = await gateway.client.post("/v1/chat/completions", headers=auth(org["api_key"]), json={
        "model": SONNET, "max_tokens": 10, "messages": [{"role": "user", "content": content}]})
    assert response.status == 200, await response.text()
    sent = [r for r in (await (await gateway.client.session.get(simulator.make_url("/_sim/requests"))).json())["data"]
            if r["path"].startswith("/model/")][-1]["body"]
    assert sent["messages"][0]["content"][1] == {"image": {"format": "png", "source": {"bytes": PNG_1PX}}}
    content[1] = {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}
    refused = await gateway.client.post("/v1/chat/completions", headers=auth(org["api_key"]), json={
        "model": SONNET, "max_tokens": 10, "messages": [{"role": "user", "content": content}]})
    assert refused.status == 400 and (await refused.json())["error"]["param"] == "messages"
    assert len(await bedrock_calls(gateway, simulator)) == 1


async def test_a_stream_that_ends_before_its_metadata_is_a_failure_not_a_free_answer(gateway, org):
    response = await gateway.client.post("/v1/chat/completions", headers=auth(org["api_key"]), json={
        "model": SONNET, "max_tokens": 20, "stream": True, "messages": [{"role": "user", "content": "x [sim:no_end]"}]})
    lines = await sse_lines(response)
    assert lines[-1] == b"[DONE]" and "metadata" in orjson.loads(lines[-2])["error"]["message"]
    (event,) = await charges(gateway)
    assert event.status == 502


async def test_more_than_one_answer_is_refused_with_a_400_naming_n(gateway, org, simulator):
    response = await gateway.client.post("/v1/chat/completions", headers=auth(org["api_key"]), json={
        "model": SONNET, "max_tokens": 10, "n": 2, "messages": [{"role": "user", "content": "x"}]})
    body = await response.json()
    assert response.status == 400 and body["error"]["param"] == "n"
    assert await bedrock_calls(gateway, simulator) == []
    assert all(event.charged_inr_nano == 0 for event in await charges(gateway))


LIES = ["usage=negative", "usage=string", "usage=huge", "usage=float", "usage=bool", "malformed", "bad_chunk"]


@pytest.mark.parametrize(("fault", "stream"), [(fault, stream) for fault in LIES for stream in (False, True)
                                               if stream or fault != "bad_chunk"])  # bad_chunk: a stream's
async def test_a_lying_bedrock_is_answered_502_and_charges_nothing(gateway, org, fault, stream):
    """A usage that would bill nonsense (or credit the org), an answer of the wrong shape, a frame
    that is not JSON: never priced, never a 500. (cached_over is no lie here: Bedrock's cache
    counts add to inputTokens, so more cached than uncached tokens is sound.)"""
    response = await gateway.client.post("/v1/chat/completions", headers=auth(org["api_key"]), json={
        "model": "bedrock/" + "global.anthropic.claude-sonnet-4-5-20250929-v1:0", "max_tokens": 20,
        "stream": stream, "messages": [{"role": "user", "content": f"x [sim:{fault}] [sim:tokens=3]"}]})
    if stream:
        lines = await sse_lines(response)
        assert lines[-1] == b"[DONE]" and orjson.loads(lines[-2])["error"]["type"] == "gateway_error"
    else:
        assert response.status == 502, await response.text()
    (event,) = await charges(gateway)
    assert event.status == 502 and event.charged_inr_nano == 0
