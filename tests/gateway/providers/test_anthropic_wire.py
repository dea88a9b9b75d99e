"""The pure translations between OpenAI chat and Anthropic Messages, both ways, without HTTP."""

import operator
from decimal import Decimal

import orjson
import pytest

from gateway.messages import wire as messages_wire
from gateway.billing.pricing import Usage, token_cost, usage_body
from gateway.edge.errors import ApiError
from gateway.providers.anthropic import wire
from gateway.accounts.redaction import forms_of, redact

PNG = "iVBORw0KGgo="
NO_CACHE_WRITES = {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0}  # usage.cache_creation
WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


def chat(messages: list, **extra) -> dict:
    return {"model": "claude-haiku-4-5", "max_tokens": 100, "messages": messages, **extra}


# -- OpenAI chat request -> Anthropic request ---------------------------------------------------

def test_a_full_conversation_translates_to_the_anthropic_request():
    body = chat([
        {"role": "system", "content": "You are terse."},
        {"role": "developer", "content": [{"type": "text", "text": "Use metric units."}]},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "user", "content": [{"type": "text", "text": "And a picture:"},
                                     {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}]},
        {"role": "assistant", "content": "Checking.", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}},
            {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": ""}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18 C"},
        {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "unknown"}]},
        {"role": "user", "content": "Thanks"},
    ], temperature=0.3, top_p=0.9, stop="END", tools=[WEATHER_TOOL], tool_choice="required",
        user="u-42", n=1, logprobs=False, stream_options={"include_usage": True})
    assert wire.messages_body(body, "claude-haiku-4-5-20251001") == {
        "model": "claude-haiku-4-5-20251001", "max_tokens": 100,
        "system": "You are terse.\n\nUse metric units.",
        "messages": [
            {"role": "user", "content": [
                {"type": "text", "text": "Weather in Paris?"}, {"type": "text", "text": "And a picture:"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Paris"}},
                {"type": "tool_use", "id": "call_2", "name": "get_weather", "input": {}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_1", "content": "18 C"},
                {"type": "tool_result", "tool_use_id": "call_2", "content": "unknown"},
                {"type": "text", "text": "Thanks"}]},
        ],
        "temperature": 0.3, "top_p": 0.9, "stop_sequences": ["END"],
        "tools": [{"name": "get_weather", "description": "Weather of a city",
                   "input_schema": WEATHER_TOOL["function"]["parameters"]}],
        "tool_choice": {"type": "any"}, "metadata": {"user_id": "u-42"},
    }


def test_a_single_text_turn_stays_a_plain_string():
    body = wire.messages_body(chat([{"role": "user", "content": "hi"}]), "m")
    assert body == {"model": "m", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize(("limits", "expected"), [
    ({"max_tokens": 50}, 50), ({"max_completion_tokens": 70}, 70),
    ({"max_tokens": 50, "max_completion_tokens": 30}, 30)])
def test_max_completion_tokens_counts_as_max_tokens(limits, expected):
    body = {"messages": [{"role": "user", "content": "hi"}], **limits}
    assert wire.messages_body(body, "m")["max_tokens"] == expected


@pytest.mark.parametrize(("choice", "parallel", "expected"), [
    ("auto", None, {"type": "auto"}),
    ("none", None, {"type": "none"}),
    ("required", None, {"type": "any"}),
    ({"type": "function", "function": {"name": "get_weather"}}, None, {"type": "tool", "name": "get_weather"}),
    (None, None, None),
    (None, False, {"type": "auto", "disable_parallel_tool_use": True}),
    ("required", False, {"type": "any", "disable_parallel_tool_use": True}),
])
def test_tool_choice_maps(choice, parallel, expected):
    assert wire.tool_choice_of(choice, parallel) == expected


def test_tool_choice_is_left_out_without_tools():
    body = wire.messages_body(chat([{"role": "user", "content": "hi"}], tool_choice="auto"), "m")
    assert "tool_choice" not in body and "tools" not in body


def test_a_tool_without_parameters_gets_an_empty_object_schema():
    tool = {"type": "function", "function": {"name": "now"}}
    assert wire.tool_of(0, tool) == {"name": "now", "input_schema": {"type": "object", "properties": {}}}


@pytest.mark.parametrize(("messages", "param", "fragment"), [
    ([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x.test/a.png"}}]}],
     "messages", "messages[0]: image_url must be a data URL"),
    ([{"role": "user", "content": "x"}, {"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}],
     "messages", "messages[1]: content parts of type 'input_audio'"),
    ([{"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{oops"}}]}],
     "messages", "messages[0].tool_calls[0] needs function.name and function.arguments"),
    ([{"role": "tool", "content": "x"}], "messages", "tool_call_id"),
    ([{"role": "function", "content": "x"}], "messages", "role 'function'"),
])
def test_untranslatable_messages_are_400_naming_the_message(messages, param, fragment):
    with pytest.raises(ApiError) as caught:
        wire.messages_body(chat(messages), "m")
    assert caught.value.status == 400 and caught.value.param == param
    assert fragment in caught.value.message


@pytest.mark.parametrize(("extra", "param"), [
    ({"tools": "get_weather"}, "tools"), ({"tools": [WEATHER_TOOL, 7]}, "tools"),
    ({"tools": [WEATHER_TOOL], "tool_choice": "sometimes"}, "tool_choice"),
    ({"tools": [WEATHER_TOOL], "tool_choice": ["auto"]}, "tool_choice"),
    ({"messages": [{"role": "assistant", "tool_calls": "f()"}]}, "messages"),
    ({"messages": [{"role": "assistant", "tool_calls": [{"id": "c", "function": "f"}]}]}, "messages"),
])
def test_malformed_fields_are_400_not_crashes(extra, param):
    with pytest.raises(ApiError) as caught:
        wire.messages_body({**chat([{"role": "user", "content": "x"}]), **extra}, "m")
    assert caught.value.status == 400 and caught.value.param == param


@pytest.mark.parametrize(("extra", "param"), [
    ({"tools": {"name": "f"}}, "tools"), ({"tools": [{"name": "f"}], "tool_choice": "auto"}, "tool_choice"),
    ({"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": [1]}]}]},
     "messages"),
    ({"system": [{"type": "image"}]}, "system"),
])
def test_malformed_anthropic_fields_are_400_not_crashes(extra, param):
    body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}], **extra}
    with pytest.raises(ApiError) as caught:
        messages_wire.chat_body(body)
    assert caught.value.status == 400 and caught.value.param == param


def test_missing_max_tokens_is_400_naming_it():
    with pytest.raises(ApiError) as caught:
        wire.messages_body({"messages": [{"role": "user", "content": "x"}]}, "m")
    assert caught.value.param == "max_tokens"


# -- Anthropic answer -> OpenAI completion ------------------------------------------------------

def test_a_message_with_text_and_tool_use_becomes_a_completion():
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
               "content": [{"type": "text", "text": "Let me "}, {"type": "text", "text": "check."},
                           {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}],
               "stop_reason": "tool_use", "stop_sequence": None,
               "usage": {"input_tokens": 10, "cache_creation_input_tokens": 5, "cache_read_input_tokens": 20,
                         "output_tokens": 7}}
    assert wire.completion(message, 1700000000) == {
        "id": "msg_1", "object": "chat.completion", "created": 1700000000, "model": "claude-x",
        "choices": [{"index": 0, "logprobs": None, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": "Let me check.",
            "tool_calls": [{"id": "toolu_1", "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}]}}],
        "service_tier": "default",  # none reported: the standard tier, by OpenAI's name
        "usage": {"prompt_tokens": 35, "completion_tokens": 7, "total_tokens": 42,
                  "prompt_tokens_details": {"cached_tokens": 20}},
    }


def test_a_tool_only_answer_has_null_content():
    message = {"content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}], "stop_reason": "tool_use"}
    reply = wire.completion(message, 0)["choices"][0]["message"]
    assert reply["content"] is None and reply["tool_calls"][0]["function"]["arguments"] == "{}"


@pytest.mark.parametrize(("stop_reason", "finish_reason"), [
    ("end_turn", "stop"), ("stop_sequence", "stop"), ("max_tokens", "length"), ("tool_use", "tool_calls"),
    ("refusal", "content_filter"), ("pause_turn", "stop"), ("something_new", "stop")])
def test_stop_reasons_map_to_finish_reasons(stop_reason, finish_reason):
    assert wire.finish_reason(stop_reason) == finish_reason


def test_usage_counts_cache_reads_and_writes_as_prompt_and_keeps_each_apart():
    usage = {"input_tokens": 3, "cache_creation_input_tokens": 4, "cache_read_input_tokens": 5, "output_tokens": 6}
    assert wire.usage_of(usage) == Usage(12, 6, cached_prompt_tokens=5, cache_write_tokens=4)
    assert wire.usage_of(None) == Usage(0, 0, 0)


# -- billing of cached prompt tokens (gateway.billing.pricing) ------------------------------------

@pytest.mark.parametrize(("prompt", "cached", "completion"), [(0, 0, 0), (10, 0, 3), (10, 10, 3), (1234, 1000, 56)])
def test_token_cost_bills_cached_prompt_tokens_at_the_cache_read_price(prompt, cached, completion):
    prices = Decimal("0.000003"), Decimal("0.000015"), Decimal("0.0000003")
    cost = token_cost(Usage(prompt, completion, cached), prices[0], prices[1], Decimal("84"), prices[2])
    usd_in = (prompt - cached) * prices[0] + cached * prices[2]
    assert Decimal(cost.usd_input_nano) / 10**9 == usd_in
    assert Decimal(cost.usd_output_nano) / 10**9 == completion * prices[1]
    assert Decimal(cost.inr_nano) / 10**9 == (usd_in + completion * prices[1]) * 84


def test_without_a_cache_price_cached_tokens_cost_the_prompt_price():
    usage = wire.usage_of({"input_tokens": 4, "cache_read_input_tokens": 6, "output_tokens": 2})
    plain = token_cost(Usage(10, 2), Decimal("0.000001"), Decimal("0.000005"), Decimal("84"))
    cached = token_cost(usage, Decimal("0.000001"), Decimal("0.000005"), Decimal("84"))
    amounts = operator.attrgetter("usd_input_nano", "usd_output_nano", "inr_nano")
    assert amounts(cached) == amounts(plain)
    assert cached.priced is not None and cached.priced.cached_tokens == 6  # recorded with the request


def test_usage_body_reports_cached_tokens_only_when_there_are_some():
    cost = token_cost(Usage(10, 2, 6), Decimal("0.000001"), Decimal("0.000005"), Decimal("84"))
    assert usage_body(Usage(10, 2, 6), cost)["prompt_tokens_details"] == {"cached_tokens": 6}
    assert "prompt_tokens_details" not in usage_body(Usage(10, 2), cost)


# -- Anthropic stream -> OpenAI chunks ----------------------------------------------------------

STREAM = [
    {"type": "message_start", "message": {"id": "msg_9", "model": "claude-x", "content": [],
                                          "usage": {"input_tokens": 11, "cache_read_input_tokens": 4,
                                                    "output_tokens": 1}}},
    {"type": "ping"},
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi "}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "there"}},
    {"type": "content_block_stop", "index": 0},
    {"type": "content_block_start", "index": 1,
     "content_block": {"type": "tool_use", "id": "toolu_9", "name": "get_weather", "input": {}}},
    {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": ""}},
    {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": '{"city":'}},
    {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": '"Paris"}'}},
    {"type": "content_block_stop", "index": 1},
    {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None},
     "usage": {"output_tokens": 9}},
    {"type": "message_stop"},
]


def test_a_stream_translates_event_by_event_into_chunks():
    translator = wire.AnthropicEventTranslator(1700000000)
    chunks = [chunk for event in STREAM for chunk in translator.feed(event)]
    assert all(c["id"] == "msg_9" and c["model"] == "claude-x" and c["created"] == 1700000000 for c in chunks)
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    deltas = [(c["choices"][0]["delta"], c["choices"][0]["finish_reason"]) for c in chunks[:-1]]
    assert deltas == [
        ({"role": "assistant", "content": ""}, None),
        ({"content": "Hi "}, None),
        ({"content": "there"}, None),
        ({"tool_calls": [{"index": 0, "id": "toolu_9", "type": "function",
                          "function": {"name": "get_weather", "arguments": ""}}]}, None),
        ({"tool_calls": [{"index": 0, "function": {"arguments": '{"city":'}}]}, None),
        ({"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]}, None),
        ({}, "tool_calls"),
    ]
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"] == {"prompt_tokens": 15, "completion_tokens": 9, "total_tokens": 24,
                                   "prompt_tokens_details": {"cached_tokens": 4}}
    assert translator.finished and translator.usage == Usage(15, 9, 4)


def test_tool_call_indexes_count_tool_calls_not_blocks():
    translator = wire.AnthropicEventTranslator(0)
    translator.feed(STREAM[0])
    for index in (3, 5):
        block = {"type": "tool_use", "id": f"t{index}", "name": "f", "input": {}}
        translator.feed({"type": "content_block_start", "index": index, "content_block": block})
    (chunk,) = translator.feed({"type": "content_block_delta", "index": 5,
                                "delta": {"type": "input_json_delta", "partial_json": "{}"}})
    assert chunk["choices"][0]["delta"]["tool_calls"][0]["index"] == 1


@pytest.mark.parametrize(("kind", "status"), [("overloaded_error", 529), ("rate_limit_error", 429),
                                              ("api_error", 500), ("mystery", 502)])
def test_an_error_event_raises_the_upstream_failure(kind, status):
    error = wire.stream_error({"type": "error", "error": {"type": kind, "message": "Overloaded"}})
    assert error.status == status and kind in error.message


def test_an_error_event_keeps_the_providers_words_for_redaction_by_value():
    """The wire keeps the message whole; the adapter removes the key the request sent
    (http.scrubbed, end to end in test_key_redaction), which a shape mask first would break up."""
    key = "sk-ant-api03-abcdefghijklmnop1234"
    error = wire.stream_error({"type": "error", "error": {"type": "api_error", "message": f"bad key {key}"}})
    assert error.message == f"anthropic stream failed: api_error: bad key {key}"
    assert "abcdefghijklmnop1234" not in redact(error.message, forms_of([key]))


def test_delta_tokens_count_content_deltas_that_carry_something():
    assert wire.delta_tokens(STREAM[3]) == 1 and wire.delta_tokens(STREAM[8]) == 1
    assert wire.delta_tokens(STREAM[7]) == 0 and wire.delta_tokens(STREAM[0]) == 0


# -- Anthropic request -> OpenAI chat (POST /v1/messages on other providers) ---------------------

def test_an_anthropic_request_translates_to_an_openai_chat_body():
    body = {"model": "gpt-4o-mini", "max_tokens": 64, "system": [{"type": "text", "text": "Be brief."}],
            "temperature": 0.5, "top_k": 5, "stop_sequences": ["END"], "metadata": {"user_id": "u-1"},
            "tools": [{"name": "get_weather", "description": "Weather", "input_schema": {"type": "object"}}],
            "tool_choice": {"type": "tool", "name": "get_weather", "disable_parallel_tool_use": True},
            "messages": [
                {"role": "user", "content": [
                    {"type": "text", "text": "Look:"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}]},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "hmm", "signature": "s"}, {"type": "text", "text": "Calling."},
                    {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "2 C"}]},
                    {"type": "text", "text": "So?"}]},
            ]}
    assert messages_wire.chat_body(body) == {
        "model": "gpt-4o-mini", "max_tokens": 64, "temperature": 0.5, "stop": ["END"], "user": "u-1",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [
                {"type": "text", "text": "Look:"},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}]},
            {"role": "assistant", "content": "Calling.", "tool_calls": [
                {"id": "toolu_1", "type": "function",
                 "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'}}]},
            {"role": "tool", "tool_call_id": "toolu_1", "content": "2 C"},
            {"role": "user", "content": [{"type": "text", "text": "So?"}]},
        ],
        "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"},
                                                    "description": "Weather"}}],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}}, "parallel_tool_calls": False,
    }


@pytest.mark.parametrize(("choice", "expected"), [
    ({"type": "auto"}, {"tool_choice": "auto"}), ({"type": "any"}, {"tool_choice": "required"}),
    ({"type": "none"}, {"tool_choice": "none"}), (None, {})])
def test_anthropic_tool_choice_maps(choice, expected):
    assert messages_wire.tool_choice_of(choice) == expected


def test_server_tools_are_400_on_other_providers():
    body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}],
            "tools": [{"type": "web_search_20250305", "name": "web_search"}]}
    with pytest.raises(ApiError) as caught:
        messages_wire.chat_body(body)
    assert caught.value.param == "tools" and "tools[0]" in caught.value.message


def test_an_openai_completion_becomes_an_anthropic_message():
    completion = {"id": "chatcmpl-1", "model": "gpt-4o-mini", "choices": [{"index": 0, "finish_reason": "tool_calls",
                  "message": {"role": "assistant", "content": "Sure.", "tool_calls": [
                      {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}},
                      {"id": "call_2", "type": "function", "function": {"name": "g", "arguments": "not json"}}]}}]}
    assert messages_wire.message(completion, Usage(30, 8, 10)) == {
        "id": "chatcmpl-1", "type": "message", "role": "assistant", "model": "gpt-4o-mini",
        "content": [{"type": "text", "text": "Sure."},
                    {"type": "tool_use", "id": "call_1", "name": "f", "input": {"a": 1}},
                    {"type": "tool_use", "id": "call_2", "name": "g", "input": {"_raw": "not json"}}],
        "stop_reason": "tool_use", "stop_sequence": None,
        "usage": {"input_tokens": 20, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 10,
                  "cache_creation": NO_CACHE_WRITES, "output_tokens": 8, "service_tier": "standard"}}


def test_openai_chunks_become_the_anthropic_event_sequence():
    head = {"id": "chatcmpl-7", "model": "gpt-4o-mini", "object": "chat.completion.chunk"}
    deltas = [({"role": "assistant", "content": ""}, None), ({"content": "Hi "}, None), ({"content": "you"}, None),
              ({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                "function": {"name": "f", "arguments": ""}}]}, None),
              ({"tool_calls": [{"index": 0, "function": {"arguments": '{"a":'}}]}, None),
              ({"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]}, None),
              ({}, "tool_calls")]
    encoder = messages_wire.MessagesEventEncoder("gpt-4o-mini")
    events = [e for delta, finish in deltas
              for e in encoder.feed({**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})]
    events += encoder.finish(Usage(12, 5))
    assert [e.name for e in events] == [
        "message_start", "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
        "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
        "message_delta", "message_stop"]
    assert all(orjson.loads(e.frame.split(b"data: ", 1)[1]) == e.data and e.data["type"] == e.name for e in events)
    assert events[0].data["message"]["id"] == "chatcmpl-7"
    assert events[1].data == {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
    assert [e.data["delta"] for e in events if e.name == "content_block_delta"] == [
        {"type": "text_delta", "text": "Hi "}, {"type": "text_delta", "text": "you"},
        {"type": "input_json_delta", "partial_json": '{"a":'}, {"type": "input_json_delta", "partial_json": "1}"}]
    assert events[5].data["content_block"] == {"type": "tool_use", "id": "call_1", "name": "f", "input": {}}
    assert [e.data["index"] for e in events[6:9]] == [1, 1, 1]
    assert events[-2].data == {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                               "usage": {"input_tokens": 12, "cache_creation_input_tokens": 0,
                                         "cache_read_input_tokens": 0, "cache_creation": NO_CACHE_WRITES,
                                         "output_tokens": 5, "service_tier": "standard"}}
    assert events[-2].usage == Usage(12, 5) and sum(e.tokens for e in events) == 4


def test_an_empty_openai_stream_still_opens_and_closes_the_message():
    events = messages_wire.MessagesEventEncoder("m").finish(None)
    assert [e.name for e in events] == ["message_start", "message_delta", "message_stop"]
    assert events[1].usage is None
