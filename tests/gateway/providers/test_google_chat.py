"""Chat on the google provider: OpenAI chat <-> Gemini generateContent / streamGenerateContent.

Pure translation tests first, then through the gateway against the simulator (the exact upstream
request it recorded, usage and exact cost, finish reasons, blocked prompts, upstream failures),
then the official openai SDK.
"""

import asyncio
import base64
from decimal import Decimal

import msgspec
import orjson
import pytest

from gateway.accounts import admin
from gateway.edge.errors import ApiError, UpstreamError
from gateway.providers.google import chat as wire
from gateway.providers.google import chat_request as request_wire
from gateway.accounts.sealing import Sealer
from gateway.edge.state import SERVICES
from simulator.textgen import completion_text, iter_tokens
from tests.support import (
    PROVIDER_KEY, decimal_json, poll, post_chat, request_events, single_attempt, sse_lines, upstream_requests,
)

MODEL = "gemini-2.5-flash"
PROMPT_PRICE, COMPLETION_PRICE = Decimal("0.0000003"), Decimal("0.0000025")
CACHE_READ_PRICE, RATE = Decimal("0.00000003"), Decimal("84.0")
PNG_B64 = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(16)).decode()
WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


def ask(text: str = "hello there", model: str = MODEL, **extra) -> dict:
    return {"model": model, "messages": [{"role": "user", "content": text}], **extra}


def cost(prompt: int, completion: int, cached: int = 0) -> dict:
    usd_in = (prompt - cached) * PROMPT_PRICE + cached * CACHE_READ_PRICE
    usd_out = completion * COMPLETION_PRICE
    return {"cost_usd_input": usd_in, "cost_usd_output": usd_out, "cost_usd_total": usd_in + usd_out,
            "cost_inr": (usd_in + usd_out) * RATE}


async def chunks_of(response) -> list[dict]:
    events = await sse_lines(response)
    assert events[-1] == b"[DONE]"
    return [decimal_json(event) for event in events[:-1]]


# -- pure translation: requests ----------------------------------------------------------------

def test_roles_system_and_merged_turns():
    body = {"messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "one"},
        {"role": "developer", "content": [{"type": "text", "text": "No lists."}]},
        {"role": "user", "content": [{"type": "text", "text": "two"}]},
        {"role": "assistant", "content": "three"},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": "four"}]}
    assert request_wire.generate_content_body(body) == {
        "contents": [{"role": "user", "parts": [{"text": "one"}, {"text": "two"}]},
                     {"role": "model", "parts": [{"text": "three"}]},
                     {"role": "user", "parts": [{"text": "four"}]}],
        "systemInstruction": {"parts": [{"text": "Be brief."}, {"text": "No lists."}]}}


def test_generation_config_maps_every_openai_parameter():
    body = {"messages": [{"role": "user", "content": "x"}], "max_tokens": 50, "max_completion_tokens": 40,
            "temperature": 0.2, "top_p": 0.9, "top_k": 5, "n": 2, "seed": 7, "presence_penalty": 0.1,
            "frequency_penalty": 0.3, "stop": "END", "response_format": {"type": "json_object"},
            "reasoning_effort": "low", "user": "ignored", "stream_options": {"include_usage": True}}
    assert request_wire.generate_content_body(body)["generationConfig"] == {
        "temperature": 0.2, "topP": 0.9, "topK": 5, "candidateCount": 2, "seed": 7,
        "presencePenalty": 0.1, "frequencyPenalty": 0.3, "maxOutputTokens": 40, "stopSequences": ["END"],
        "responseMimeType": "application/json", "thinkingConfig": {"thinkingBudget": 1024}}


def test_json_schema_response_format_sends_the_schema():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    fmt = {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}
    assert request_wire.generation_config({"response_format": fmt}) == {
        "responseMimeType": "application/json", "responseJsonSchema": schema}
    assert request_wire.generation_config({"response_format": {"type": "text"}}) == {}


def test_images_audio_and_files_become_inline_data():
    content = [{"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}},
               {"type": "image_url", "image_url": f"data:image/jpeg;base64,{PNG_B64}"},
               {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
               {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBERi0="}}]
    [turn] = request_wire.generate_content_body({"messages": [{"role": "user", "content": content}]})["contents"]
    assert turn["parts"] == [{"inlineData": {"mimeType": "image/png", "data": PNG_B64}},
                             {"inlineData": {"mimeType": "image/jpeg", "data": PNG_B64}},
                             {"inlineData": {"mimeType": "audio/wav", "data": "UklGRg=="}},
                             {"inlineData": {"mimeType": "application/pdf", "data": "JVBERi0="}}]


def test_tools_calls_and_results_become_function_parts():
    call = {"id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
    body = {"messages": [{"role": "user", "content": "weather?"},
                         {"role": "assistant", "content": None, "tool_calls": [call]},
                         {"role": "tool", "tool_call_id": "call_1", "content": '{"sky": "clear"}'},
                         {"role": "tool", "tool_call_id": "call_1", "content": "plain words"}],
            "tools": [WEATHER_TOOL], "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}
    request = request_wire.generate_content_body(body)
    assert request["contents"][1:] == [
        {"role": "model", "parts": [{"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}}]},
        {"role": "user", "parts": [
            {"functionResponse": {"name": "get_weather", "response": {"sky": "clear"}}},
            {"functionResponse": {"name": "get_weather", "response": {"content": "plain words"}}}]}]
    assert request["tools"] == [{"functionDeclarations": [{
        "name": "get_weather", "description": "Weather of a city",
        "parametersJsonSchema": WEATHER_TOOL["function"]["parameters"]}]}]
    assert request["toolConfig"] == {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["get_weather"]}}
    assert request_wire.tool_config("none") == {"functionCallingConfig": {"mode": "NONE"}}
    assert request_wire.tool_config("required") == {"functionCallingConfig": {"mode": "ANY"}}


@pytest.mark.parametrize(("body", "param"), [
    ({"messages": [{"role": "user", "content": [
        {"type": "text", "text": "x"}, {"type": "image_url", "image_url": {"url": "https://x.test/a.png"}}]}]},
     "messages[0].content[1].image_url"),
    ({"messages": [{"role": "user", "content": [{"type": "video", "video": {}}]}]}, "messages[0].content[0].type"),
    ({"messages": [{"role": "narrator", "content": "x"}]}, "messages[0].role"),
    ({"messages": [{"role": "system", "content": "only a system prompt"}]}, "messages"),
    ({"messages": [{"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": "nope", "content": "1"}]},
     "messages[1].tool_call_id"),
    ({"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "[1]"}}]}]},
     "messages[0].tool_calls[0]"),
    ({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "retrieval"}]}, "tools[0]"),
    ({"messages": [{"role": "user", "content": "x"}], "tool_choice": "sometimes"}, "tool_choice"),
    ({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "yaml"}}, "response_format"),
    ({"messages": [{"role": "user", "content": "x"}], "reasoning_effort": "max"}, "reasoning_effort"),
])
def test_bad_input_is_400_naming_the_field(body, param):
    with pytest.raises(ApiError) as raised:
        request_wire.generate_content_body(body)
    assert raised.value.status == 400 and raised.value.param == param


# -- pure translation: answers -----------------------------------------------------------------

def answer(parts: list[dict], finish: str = "STOP", **extra) -> dict:
    return {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": finish, "index": 0}],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 4, "totalTokenCount": 14}, **extra}


@pytest.mark.parametrize(("finish", "expected"), [
    ("STOP", "stop"), ("MAX_TOKENS", "length"), ("SAFETY", "content_filter"),
    ("RECITATION", "content_filter"), ("BLOCKLIST", "content_filter"),
    ("PROHIBITED_CONTENT", "content_filter"), ("SPII", "content_filter"), ("OTHER", "stop")])
def test_finish_reasons_map_to_openai(finish, expected):
    reply, _ = wire.completion(answer([{"text": "hi"}], finish), "chatcmpl-req_1", MODEL, 1700000000)
    assert reply["choices"][0]["finish_reason"] == expected


def test_completion_has_the_openai_shape_without_thoughts():
    parts = [{"text": "thinking about it", "thought": True}, {"text": "Hello "}, {"text": "world"}]
    metadata = {"promptTokenCount": 10, "candidatesTokenCount": 4, "thoughtsTokenCount": 6,
                "cachedContentTokenCount": 3, "totalTokenCount": 20}
    reply, _ = wire.completion(answer(parts, usageMetadata=metadata), "chatcmpl-req_1", MODEL, 1700000000)
    assert reply == {
        "id": "chatcmpl-req_1", "object": "chat.completion", "created": 1700000000, "model": MODEL,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello world"},
                     "logprobs": None, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20,
                  "prompt_tokens_details": {"cached_tokens": 3},
                  "completion_tokens_details": {"reasoning_tokens": 6}}}
    assert wire.usage_of(metadata) == wire.Usage(10, 10, 3)


def test_function_calls_become_tool_calls():
    parts = [{"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}},
             {"functionCall": {"name": "get_time", "args": {}, "id": "given-id"}}]
    [choice] = wire.completion(answer(parts), "chatcmpl-req_9", MODEL, 1)[0]["choices"]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"] == {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_req_9_0_0", "type": "function",
         "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}},
        {"id": "given-id", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}]}


def test_blocked_prompt_is_an_error_not_an_empty_success():
    blocked = {"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}, "usageMetadata": {"promptTokenCount": 5}}
    for translate in (lambda: wire.completion(blocked, "chatcmpl-x", MODEL, 1),
                      lambda: wire.GeminiChunkTranslator("chatcmpl-x", MODEL, 1).feed(blocked)):
        with pytest.raises(UpstreamError) as raised:
            translate()
        assert raised.value.status == 400
        assert raised.value.message == "google blocked the prompt (PROHIBITED_CONTENT)"
    with pytest.raises(UpstreamError) as raised:
        wire.completion({"candidates": []}, "chatcmpl-x", MODEL, 1)
    assert raised.value.status == 502


def test_stream_translator_role_first_tool_calls_and_usage_last():
    translator = wire.GeminiChunkTranslator("chatcmpl-req_2", MODEL, 5)
    call = {"functionCall": {"name": "f", "args": {"a": 1}}}
    chunks = [translator.feed(answer([{"text": "Hel"}], finish=None)),
              translator.feed(answer([{"text": "lo"}, call], finish=None)),
              translator.feed({"usageMetadata": {"promptTokenCount": 3}}),
              translator.feed(answer([{"text": ""}], usageMetadata={"promptTokenCount": 3, "candidatesTokenCount": 9}))]
    deltas = [c and c["choices"][0]["delta"] for c in chunks]
    assert deltas == [{"role": "assistant", "content": "Hel"},
                      {"content": "lo", "tool_calls": [{"index": 0, "id": "call_req_2_0_0", "type": "function",
                                                        "function": {"name": "f", "arguments": '{"a":1}'}}]},
                      None, {}]
    assert [c["choices"][0]["finish_reason"] for c in chunks if c] == [None, None, "tool_calls"]
    assert chunks[0]["id"] == "chatcmpl-req_2" and chunks[0]["object"] == "chat.completion.chunk"
    assert translator.finished and translator.usage == wire.Usage(3, 9)
    last = translator.usage_chunk(translator.usage)
    assert last["choices"] == [] and last["usage"]["total_tokens"] == 12


def test_stream_error_event_raises_with_the_upstream_status():
    event = {"error": {"code": 503, "status": "UNAVAILABLE", "message": "model overloaded"}}
    error = wire.stream_error(event["error"])
    assert error.status == 503 and "UNAVAILABLE: model overloaded" in error.message


# -- through the gateway -----------------------------------------------------------------------

async def test_exact_upstream_request_for_system_roles_images_and_generation_config(gateway, org, simulator):
    body = {"model": MODEL, "max_tokens": 40, "temperature": 0.5, "top_p": 0.9, "stop": ["END"], "seed": 7,
            "response_format": {"type": "json_object"}, "user": "u1", "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "developer", "content": "Answer in English."},
                {"role": "user", "content": "first"},
                {"role": "user", "content": [
                    {"type": "text", "text": "what is this?"},
                    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}}]},
                {"role": "assistant", "content": "A picture."},
                {"role": "user", "content": "thanks"}]}
    response = await post_chat(gateway, org, body)
    assert response.status == 200, await response.text()
    [sent] = await upstream_requests(gateway, simulator)
    assert sent["path"] == f"/v1beta/models/{MODEL}:generateContent" and sent["query"] == {}
    assert sent["headers"]["x-goog-api-key"] == PROVIDER_KEY and "authorization" not in sent["headers"]
    assert sent["body"] == {
        "contents": [
            {"role": "user", "parts": [{"text": "first"}, {"text": "what is this?"},
                                       {"inlineData": {"mimeType": "image/png", "data": PNG_B64}}]},
            {"role": "model", "parts": [{"text": "A picture."}]},
            {"role": "user", "parts": [{"text": "thanks"}]}],
        "systemInstruction": {"parts": [{"text": "Be brief."}, {"text": "Answer in English."}]},
        "generationConfig": {"temperature": 0.5, "topP": 0.9, "seed": 7, "maxOutputTokens": 40,
                             "stopSequences": ["END"], "responseMimeType": "application/json"}}
    # The simulator's count: system 5 words + 4; turns (4 words + 4 + an image's 258), 2 + 4, 1 + 4.
    usage = decimal_json(await response.read())["usage"]
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == (9 + 266 + 6 + 5, 16)


async def test_json_completion_carries_usage_and_exact_cost(gateway, org):
    response = await post_chat(gateway, org, ask("one two three"))
    body = decimal_json(await response.read())
    assert body["id"] == f"chatcmpl-{response.headers['X-Request-Id']}"
    assert body["object"] == "chat.completion" and body["model"] == MODEL and body["created"] > 0
    assert body["choices"] == [{"index": 0, "message": {"role": "assistant", "content": completion_text(16)},
                                "logprobs": None, "finish_reason": "stop"}]
    usage = body["usage"]
    assert (usage["prompt_tokens"], usage["completion_tokens"], usage["total_tokens"]) == (7, 16, 23)
    assert {name: usage[name] for name in cost(7, 16)} == cost(7, 16)
    assert await gateway.balance(org["org_id"]) == Decimal(100) - cost(7, 16)["cost_inr"]
    [event] = await request_events(gateway)
    assert (event.provider, event.model, event.status, event.prompt_tokens) == ("google", MODEL, 200, 7)


async def test_cached_prompt_tokens_are_cheaper_and_thoughts_are_output(gateway, org):
    response = await post_chat(gateway, org, ask("a b c d e f [sim:cached=4] [sim:thoughts=5]"))
    usage = decimal_json(await response.read())["usage"]
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == (12, 16 + 5)
    assert usage["prompt_tokens_details"] == {"cached_tokens": 4}
    assert usage["completion_tokens_details"] == {"reasoning_tokens": 5}
    assert {name: usage[name] for name in cost(12, 21, cached=4)} == cost(12, 21, cached=4)


@pytest.mark.parametrize(("text", "extra", "expected"), [
    ("x", {"max_tokens": 3}, "length"), ("x [sim:finish=SAFETY]", {}, "content_filter"),
    ("x [sim:finish=RECITATION]", {}, "content_filter"), ("x [sim:finish=OTHER]", {}, "stop"),
    ("x [sim:tool=get_weather]", {"tools": [WEATHER_TOOL]}, "tool_calls")])
async def test_finish_reasons_json_and_streamed(gateway, org, text, extra, expected):
    reply = decimal_json(await (await post_chat(gateway, org, ask(text, **extra))).read())
    assert reply["choices"][0]["finish_reason"] == expected
    chunks = await chunks_of(await post_chat(gateway, org, ask(text, stream=True, **extra)))
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == expected


async def test_tool_call_round_trip(gateway, org, simulator):
    body = ask("weather in Paris? [sim:tokens=0] [sim:tool=get_weather]", tools=[WEATHER_TOOL], tool_choice="auto")
    reply = decimal_json(await (await post_chat(gateway, org, body)).read())
    [call] = reply["choices"][0]["message"]["tool_calls"]
    assert reply["choices"][0]["message"]["content"] is None
    assert call["function"] == {"name": "get_weather", "arguments": '{"city":"the quick brown fox"}'}
    follow_up = {**body, "messages": [*body["messages"], reply["choices"][0]["message"],
                                      {"role": "tool", "tool_call_id": call["id"], "content": "sunny"}]}
    follow_up["messages"][0] = {"role": "user", "content": "weather in Paris? [sim:tokens=2]"}
    second = await post_chat(gateway, org, follow_up)
    assert decimal_json(await second.read())["choices"][0]["message"]["content"] == completion_text(2)
    sent = (await upstream_requests(gateway, simulator))[-1]["body"]
    assert sent["contents"][1:] == [
        {"role": "model", "parts": [{"functionCall": {"name": "get_weather",
                                                      "args": {"city": "the quick brown fox"}}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "get_weather", "response": {"content": "sunny"}}}]}]
    assert sent["toolConfig"] == {"functionCallingConfig": {"mode": "AUTO"}}


async def test_stream_relays_chunks_then_usage_with_exact_cost(gateway, org, simulator):
    body = ask("a b [sim:tokens=5]", stream=True, stream_options={"include_usage": True})
    response = await post_chat(gateway, org, body)
    assert response.status == 200 and response.headers["Content-Type"].startswith("text/event-stream")
    chunks = await chunks_of(response)
    with_choices = [c for c in chunks if c["choices"]]
    deltas = [c["choices"][0]["delta"] for c in with_choices]
    assert deltas[0] == {"role": "assistant", "content": "the "}
    assert all("role" not in d for d in deltas[1:]) and deltas[-1] == {}
    assert "".join(d.get("content", "") for d in deltas) == completion_text(5)
    [event] = await request_events(gateway)
    assert {c["id"] for c in chunks} == {f"chatcmpl-{event.request_id}"}
    assert chunks[-1]["choices"] == [] and chunks[-1]["model"] == MODEL
    usage = chunks[-1]["usage"]
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == (7, 5)
    assert {name: usage[name] for name in cost(7, 5)} == cost(7, 5)
    assert await gateway.balance(org["org_id"]) == Decimal(100) - cost(7, 5)["cost_inr"]
    [sent] = await upstream_requests(gateway, simulator)
    assert sent["path"] == f"/v1beta/models/{MODEL}:streamGenerateContent" and sent["query"] == {"alt": "sse"}
    assert "stream" not in sent["body"] and "stream_options" not in sent["body"]


async def test_stream_without_include_usage_is_billed_on_reported_usage(gateway, org):
    chunks = await chunks_of(await post_chat(gateway, org, ask("a b [sim:tokens=4]", stream=True)))
    assert all(c["choices"] for c in chunks)
    [event] = await request_events(gateway)
    assert (event.status, event.prompt_tokens, event.completion_tokens) == (200, 7, 4)
    assert event.charged_inr_nano == event.cost_inr_nano > 0


async def test_stream_tool_call_arrives_as_one_delta(gateway, org):
    body = ask("x [sim:tokens=1] [sim:tool=get_weather]", stream=True, tools=[WEATHER_TOOL])
    chunks = await chunks_of(await post_chat(gateway, org, body))
    calls = [d["tool_calls"] for c in chunks for d in [c["choices"][0]["delta"]] if "tool_calls" in d]
    assert calls == [[{"index": 0, "id": calls[0][0]["id"], "type": "function",
                       "function": {"name": "get_weather", "arguments": '{"city":"the quick brown fox"}'}}]]


async def test_first_chunks_reach_the_client_while_upstream_still_generates(gateway, org):
    response = await post_chat(gateway, org, ask("go [sim:hang_after=2]", stream=True))
    received = b""
    while received.count(b"data: ") < 2:
        received += await asyncio.wait_for(response.content.readany(), 5)
    assert b'"content":"the "' in received and b'"content":"quick "' in received
    response.close()


async def test_client_disconnect_cancels_upstream_and_bills_what_was_delivered(gateway, org, simulator):
    response = await post_chat(gateway, org, ask("go [sim:hang_after=3]", stream=True))
    received = b""
    while received.count(b"data: ") < 3:
        received += await asyncio.wait_for(response.content.readany(), 5)
    response.close()
    events = await poll(lambda: request_events(gateway))
    [event] = events
    assert (event.status, event.completion_tokens) == (499, 3) and event.charged_inr_nano > 0
    outcome = await poll(lambda: _last_outcome(gateway, simulator), lambda o: o == "disconnected")
    assert outcome == "disconnected"


async def _last_outcome(gateway, simulator) -> str:
    return (await upstream_requests(gateway, simulator))[-1]["outcome"]


@pytest.mark.parametrize("stream", [False, True])
async def test_blocked_prompt_is_a_clear_400_and_not_charged(gateway, org, stream):
    response = await post_chat(gateway, org, ask("bad [sim:block=prompt]", model=f"google/{MODEL}", stream=stream))
    assert response.status == 400 and response.content_type == "application/json"
    assert (await response.json())["error"] == {
        "message": "google blocked the prompt (SAFETY)", "type": "gateway_error", "code": "gateway_error",
        "param": None, "usedProvider": "google", "requestedModel": f"google/{MODEL}"}
    assert await gateway.balance(org["org_id"]) == 100
    [event] = await request_events(gateway)
    assert event.status == 400 and event.charged_inr_nano == 0 and "blocked" in event.error


async def test_prompt_blocked_with_a_400_says_so(gateway, org):
    response = await post_chat(gateway, org, ask("bad [sim:block=400]"))
    assert response.status == 400
    assert (await response.json())["error"]["message"] == (
        "google returned 400: The prompt was blocked due to safety reasons.")
    assert await gateway.balance(org["org_id"]) == 100


async def test_candidate_stopped_for_safety_is_a_content_filter_finish(gateway, org):
    reply = decimal_json(await (await post_chat(gateway, org, ask("x [sim:block=candidate]"))).read())
    assert reply["choices"][0]["finish_reason"] == "content_filter"
    assert reply["choices"][0]["message"]["content"] == ""
    assert reply["usage"]["completion_tokens"] == 0


@pytest.mark.parametrize(("directive", "status"), [
    ("[sim:status=429]", 429), ("[sim:status=500]", 502), ("[sim:status=503]", 502), ("[sim:drop_after=0]", 502)])
@pytest.mark.parametrize("stream", [False, True])
async def test_upstream_failures_become_gateway_errors_and_are_not_charged(make_gateway, config, directive, status,
                                                                         stream):
    gateway = await make_gateway(single_attempt(config))  # Vertex serves the model too
    org = await gateway.new_org("100")
    response = await post_chat(gateway, org, ask(f"x {directive}", stream=stream))
    assert response.status == status
    error = (await response.json())["error"]
    assert error["type"] == "gateway_error" and error["usedProvider"] == "google"
    if "status" in directive:
        assert f"google returned {directive[12:15]}: simulated error" in error["message"]
    assert (response.headers.get("Retry-After") == "1") == (status == 429)
    assert await gateway.balance(org["org_id"]) == 100
    [event] = await request_events(gateway)
    assert event.status == status and event.charged_inr_nano == 0


async def test_stream_broken_mid_way_ends_with_an_error_event_and_no_charge(gateway, org):
    events = await sse_lines(await post_chat(gateway, org, ask("x [sim:drop_after=2]", stream=True)))
    assert events[-1] == b"[DONE]"
    assert [orjson.loads(e)["choices"][0]["delta"].get("content") for e in events[:2]] == list(iter_tokens(2))
    assert orjson.loads(events[-2])["error"]["type"] == "gateway_error"
    [event] = await request_events(gateway)
    assert event.status == 502 and event.charged_inr_nano == 0


async def test_upstream_silence_is_504(make_gateway, config):
    google = msgspec.structs.replace(config.providers["google"], timeout_s=0.3)
    gateway = await make_gateway(msgspec.structs.replace(
        config, providers={**config.providers, "google": google}))
    org = await gateway.new_org("100")  # covers the worst case of gemini's 65,536 output tokens
    for stream in (False, True):
        response = await post_chat(gateway, org, ask("x [sim:hang]", stream=stream))
        assert response.status == 504
    assert await gateway.balance(org["org_id"]) == 100


async def test_image_url_that_is_not_a_data_url_is_400_without_upstream_call(gateway, org, simulator):
    content = [{"type": "text", "text": "what?"}, {"type": "image_url", "image_url": {"url": "https://x.test/a.png"}}]
    response = await post_chat(gateway, org, {"model": MODEL, "messages": [{"role": "user", "content": content}]})
    assert response.status == 400
    error = (await response.json())["error"]
    assert error["param"] == "messages[0].content[1].image_url" and "data URL" in error["message"]
    assert await upstream_requests(gateway, simulator) == []
    # The body is translated after the worst case was held: the hold's background release records
    # the request, uncharged, with its 400 (gateway.billing.releases); never a charge.
    await gateway.server.app[SERVICES].releases.settled()
    assert all((e.status, e.charged_inr_nano) == (400, 0) for e in await request_events(gateway))


async def test_the_orgs_own_google_key_is_used_for_chat(make_gateway, config, simulator):
    master = "test-master-key-0123456789"
    gateway = await make_gateway(msgspec.structs.replace(
        config, secrets=msgspec.structs.replace(config.secrets, master_key=master)))
    org = await gateway.new_org("100")
    own = "AIzaOrgOwnGoogleKey0123456789abcdef"
    await admin.set_provider_key(gateway.ledger.recorder, Sealer(master), org["org_id"], "google", own)
    await gateway.ledger.follower.catch_up()
    for stream in (False, True):
        response = await post_chat(gateway, org, ask(stream=stream))
        assert response.status == 200
        await response.read()
    assert [r["headers"]["x-goog-api-key"] for r in await upstream_requests(gateway, simulator)] == [own, own]
    assert await gateway.balance(org["org_id"]) == 100


# -- the official openai SDK -------------------------------------------------------------------

@pytest.mark.parametrize("model", [MODEL, f"google/{MODEL}"])
async def test_openai_sdk_json_and_stream(gateway, org, model):
    openai = pytest.importorskip("openai")
    client = openai.AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=org["api_key"], max_retries=0)
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi [sim:tokens=4]"}]
    reply = await client.chat.completions.create(model=model, messages=messages)
    assert reply.choices[0].message.content == completion_text(4) and reply.model == MODEL
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (12, 4)
    stream = await client.chat.completions.create(model=model, messages=messages, stream=True,
                                                  stream_options={"include_usage": True})
    chunks = [chunk async for chunk in stream]
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == completion_text(4)
    assert chunks[-1].usage.completion_tokens == 4
    charged = Decimal(str(reply.usage.model_extra["cost_inr"])) + Decimal(str(chunks[-1].usage.model_extra["cost_inr"]))
    assert charged == 2 * cost(12, 4)["cost_inr"]
    assert await gateway.balance(org["org_id"]) == Decimal(100) - charged
    with pytest.raises(openai.BadRequestError) as raised:
        await client.chat.completions.create(model=model, messages=[{"role": "user", "content": "[sim:block=prompt]"}])
    assert "google blocked the prompt" in str(raised.value)
