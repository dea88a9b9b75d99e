"""The pure translations of the Responses API for chat-served models: a Responses request into an
OpenAI chat body, and a chat completion back into a Responses `response` object (checked against
the openai SDK's own model of it), without HTTP."""

import pytest
from openai.types.responses import Response

from gateway.billing.pricing import Usage
from gateway.edge.errors import ApiError
from gateway.providers.anthropic import wire as anthropic_wire
from gateway.providers.google import chat_request as google_chat_request
from gateway.responses.translate import chat_body, response_object, usage_object

PNG_URL = "data:image/png;base64,iVBORw0KGgo="
WEATHER_TOOL = {"type": "function", "name": "get_weather", "description": "Weather of a city",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}, "strict": True}
USAGE = Usage(30, 8, 10, 5)
CHAT_WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather of a city", "parameters": WEATHER_TOOL["parameters"],
    "strict": True}}


def request(input_: object = "Hi", **fields: object) -> dict:
    return {"model": "claude-haiku-4-5", "input": input_, **fields}


def call_item(call_id: str, arguments: str = '{"city":"Paris"}') -> dict:
    return {"type": "function_call", "call_id": call_id, "name": "get_weather", "arguments": arguments}


def chat_call(call_id: str, arguments: str = '{"city":"Paris"}') -> dict:
    return {"id": call_id, "type": "function", "function": {"name": "get_weather", "arguments": arguments}}


# -- Responses request -> chat body --------------------------------------------------------------

def test_a_string_input_is_one_user_message():
    assert chat_body(request("Hello")) == {"model": "claude-haiku-4-5",
                                           "messages": [{"role": "user", "content": "Hello"}]}


def test_a_full_request_translates_every_field():
    items = [
        {"role": "developer", "content": [{"type": "input_text", "text": "Use metric units."}]},
        {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "Weather here?"},
            {"type": "input_image", "image_url": PNG_URL, "detail": "low"}]},
        {"type": "message", "role": "assistant", "content": [
            {"type": "output_text", "text": "Checking.", "annotations": []}]},
        call_item("call_1"), call_item("call_2", '{"city":"Lyon"}'),
        {"type": "function_call_output", "call_id": "call_1", "output": "18 C"},
        {"type": "function_call_output", "call_id": "call_2", "name": "get_weather",
         "output": [{"type": "input_text", "text": "20 "}, {"type": "input_text", "text": "C"}]},
        {"role": "user", "content": "Thanks"},
    ]
    body = request(items, instructions="You are terse.", tools=[WEATHER_TOOL],
                   tool_choice={"type": "function", "name": "get_weather"}, max_output_tokens=300,
                   temperature=0.2, top_p=0.9, parallel_tool_calls=False, user="u-1",
                   reasoning={"effort": "low"}, stream=True, metadata={"k": "v"}, store=True,
                   text={"format": {"type": "json_schema", "name": "weather", "schema": {"type": "object"},
                                    "strict": True}})
    assert chat_body(body) == {
        "model": "claude-haiku-4-5",
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "developer", "content": "Use metric units."},
            {"role": "user", "content": [
                {"type": "text", "text": "Weather here?"},
                {"type": "image_url", "image_url": {"url": PNG_URL, "detail": "low"}}]},
            {"role": "assistant", "content": "Checking.",
             "tool_calls": [chat_call("call_1"), chat_call("call_2", '{"city":"Lyon"}')]},
            {"role": "tool", "tool_call_id": "call_1", "content": "18 C"},
            {"role": "tool", "tool_call_id": "call_2", "content": "20 C", "name": "get_weather"},
            {"role": "user", "content": "Thanks"},
        ],
        "temperature": 0.2, "top_p": 0.9, "parallel_tool_calls": False, "user": "u-1", "max_tokens": 300,
        "tools": [CHAT_WEATHER_TOOL], "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
        "response_format": {"type": "json_schema", "json_schema": {
            "name": "weather", "schema": {"type": "object"}, "strict": True}},
        "reasoning_effort": "low", "stream": True, "stream_options": {"include_usage": True},
    }


def test_function_calls_without_text_before_them_merge_into_one_assistant_message():
    items = [{"role": "user", "content": "Paris and Lyon?"}, call_item("a"), call_item("b"),
             {"type": "function_call_output", "call_id": "a", "output": "1"}, call_item("c")]
    assert chat_body(request(items))["messages"][1:] == [
        {"role": "assistant", "content": None, "tool_calls": [chat_call("a"), chat_call("b")]},
        {"role": "tool", "tool_call_id": "a", "content": "1"},
        {"role": "assistant", "content": None, "tool_calls": [chat_call("c")]}]


def test_history_goes_after_the_instructions_and_before_the_input():
    history = [{"type": "message", "role": "user", "content": "First"},
               {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": "One", "annotations": [], "logprobs": []}]},
               {"id": "rs_1", "type": "reasoning", "summary": [], "encrypted_content": "opaque"}]
    body = chat_body(request("Second", instructions="Count."), history)
    assert body["messages"] == [{"role": "system", "content": "Count."}, {"role": "user", "content": "First"},
                                {"role": "assistant", "content": "One"}, {"role": "user", "content": "Second"}]


def test_history_alone_needs_no_input():
    history = [{"role": "user", "content": "Hi"}]
    assert chat_body({"model": "m"}, history)["messages"] == [{"role": "user", "content": "Hi"}]


@pytest.mark.parametrize(("choice", "expected"), [
    ("auto", "auto"), ("none", "none"), ("required", "required"),
    ({"type": "function", "name": "f"}, {"type": "function", "function": {"name": "f"}})])
def test_tool_choice_translates(choice, expected):
    assert chat_body(request(tool_choice=choice))["tool_choice"] == expected


@pytest.mark.parametrize(("text", "expected"), [
    ({"format": {"type": "text"}}, None), ({"verbosity": "low"}, None),
    ({"format": {"type": "json_object"}}, {"type": "json_object"}),
    ({"format": {"type": "json_schema", "name": "n", "description": "d", "schema": {"type": "object"}}},
     {"type": "json_schema", "json_schema": {"name": "n", "description": "d", "schema": {"type": "object"}}})])
def test_text_format_translates_to_response_format(text, expected):
    assert chat_body(request(text=text)).get("response_format") == expected


def test_unset_and_null_fields_are_left_out():
    body = request(temperature=None, tools=[], tool_choice=None, reasoning={"effort": None}, stream=False,
                   instructions="", max_output_tokens=None, text=None)
    assert chat_body(body) == {"model": "claude-haiku-4-5", "messages": [{"role": "user", "content": "Hi"}]}


@pytest.mark.parametrize(("body", "param"), [
    (request(tools=[{"type": "web_search"}]), "tools[0].type"),
    (request(tools=[WEATHER_TOOL, {"type": "function"}]), "tools[1].name"),
    (request(tools={"type": "function"}), "tools"),
    (request([{"type": "item_reference", "id": "msg_1"}]), "input[0].type"),
    (request([{"role": "user", "content": [{"type": "input_image", "file_id": "file_1"}]}]),
     "input[0].content[0].file_id"),
    (request([{"role": "user", "content": [{"type": "input_image", "detail": "auto"}]}]),
     "input[0].content[0].image_url"),
    (request([{"role": "user", "content": [{"type": "input_file", "file_data": "x"}]}]), "input[0].content[0].type"),
    (request([{"role": "user", "content": ["text"]}]), "input[0].content[0].type"),
    (request([{"role": "user", "content": [{"type": "input_text", "text": 3}]}]), "input[0].content[0].text"),
    (request([{"role": "system", "content": [{"type": "input_image", "image_url": PNG_URL}]}]), "input[0].content"),
    (request([{"role": "tool", "content": "x"}]), "input[0].role"),
    (request([{"role": "user", "content": {"text": "x"}}]), "input[0].content"),
    (request(["Hi"]), "input[0]"),
    (request([{"type": "function_call", "name": "f", "arguments": "{}"}]), "input[0].call_id"),
    (request([call_item("a", arguments={"city": "Paris"})]), "input[0].arguments"),
    (request([{"type": "function_call_output", "call_id": "a", "output": {"x": 1}}]), "input[0].output"),
    (request([{"type": "function_call_output", "call_id": "a",
               "output": [{"type": "input_image", "image_url": PNG_URL}]}]), "input[0].output"),
    (request([{"type": "function_call_output", "output": "x"}]), "input[0].call_id"),
    (request(None), "input"), (request([]), "input"), (request(7), "input"),
    (request(instructions=["x"]), "instructions"),
    (request(tool_choice={"type": "allowed_tools", "mode": "auto", "tools": []}), "tool_choice"),
    (request(tool_choice="any"), "tool_choice"),
    (request(text={"format": {"type": "grammar"}}), "text.format.type"),
    (request(prompt={"id": "pmpt_1"}), "prompt"),
    (request(conversation="conv_1"), "conversation"),
])
def test_what_cannot_be_translated_is_a_400_naming_the_field(body, param):
    with pytest.raises(ApiError) as raised:
        chat_body(body)
    assert (raised.value.status, raised.value.param) == (400, param)
    assert raised.value.message.startswith(param.split(".")[0].split("[")[0])


def test_an_untranslatable_history_item_names_previous_response_id():
    history = [{"role": "user", "content": "Hi"}, {"type": "web_search_call", "id": "ws_1", "status": "completed"}]
    with pytest.raises(ApiError) as raised:
        chat_body(request("Next"), history)
    assert (raised.value.status, raised.value.param) == (400, "previous_response_id")
    assert "item 1" in raised.value.message and "web_search_call" in raised.value.message


# -- chat completion -> Responses object -------------------------------------------------------

def completion(content: str | None, calls: list[dict] = (), finish_reason: str = "stop") -> dict:
    message = {"role": "assistant", "content": content, **({"tool_calls": list(calls)} if calls else {})}
    return {"id": "chatcmpl-1", "object": "chat.completion", "model": "claude-haiku-4-5",
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}]}


def answer(reply: dict, **fields: object) -> dict:
    return response_object(reply, USAGE, response_id="resp_1", model="claude-haiku-4-5", created_at=1_700_000_000,
                           request=request(**fields))


def test_usage_object_reports_the_cached_and_cache_written_prompt_tokens():
    assert usage_object(Usage(30, 8, 10, 5)) == {
        "input_tokens": 30, "input_tokens_details": {"cached_tokens": 10, "cache_write_tokens": 5},
        "output_tokens": 8, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 38}


def test_a_text_and_tool_call_answer_is_a_completed_response():
    obj = answer(completion("Checking.", [chat_call("call_1"), chat_call("call_2", "")], "tool_calls"))
    message, first, second = obj["output"]
    assert message["id"].startswith("msg_") and first["id"].startswith("fc_") and second["id"] != first["id"]
    assert message == {"id": message["id"], "type": "message", "role": "assistant", "status": "completed",
                       "content": [{"type": "output_text", "text": "Checking.", "annotations": [], "logprobs": []}]}
    assert first == {"id": first["id"], "type": "function_call", "status": "completed", "call_id": "call_1",
                     "name": "get_weather", "arguments": '{"city":"Paris"}'}
    assert (second["call_id"], second["arguments"]) == ("call_2", "")
    assert {key: obj[key] for key in ("id", "object", "created_at", "status", "model", "error",
                                      "incomplete_details")} == {
        "id": "resp_1", "object": "response", "created_at": 1_700_000_000, "status": "completed",
        "model": "claude-haiku-4-5", "error": None, "incomplete_details": None}
    assert obj["usage"] == usage_object(Usage(30, 8, 10, 5))
    parsed = Response.model_validate(obj)
    assert parsed.output_text == "Checking." and parsed.usage is not None and parsed.usage.total_tokens == 38


def test_an_answer_without_text_has_only_its_calls():
    obj = answer(completion(None, [chat_call("call_1")], "tool_calls"))
    assert [item["type"] for item in obj["output"]] == ["function_call"]
    Response.model_validate(obj)


@pytest.mark.parametrize(("finish_reason", "reason"), [("length", "max_output_tokens"),
                                                         ("content_filter", "content_filter")])
def test_a_cut_answer_is_incomplete_and_so_is_its_last_item(finish_reason, reason):
    obj = answer(completion("Once upon", [chat_call("call_1", '{"ci')], finish_reason))
    assert (obj["status"], obj["incomplete_details"]) == ("incomplete", {"reason": reason})
    assert [item["status"] for item in obj["output"]] == ["completed", "incomplete"]
    assert Response.model_validate(obj).incomplete_details.reason == reason


def test_the_response_echoes_the_api_defaults_for_unset_settings():
    obj = answer(completion("Hi"))
    assert {key: obj[key] for key in ("instructions", "max_output_tokens", "metadata", "parallel_tool_calls",
                                      "previous_response_id", "reasoning", "store", "temperature", "text",
                                      "tool_choice", "tools", "top_p", "truncation", "user")} == {
        "instructions": None, "max_output_tokens": None, "metadata": {}, "parallel_tool_calls": True,
        "previous_response_id": None, "reasoning": {"effort": None, "summary": None}, "store": True,
        "temperature": 1.0, "text": {"format": {"type": "text"}}, "tool_choice": "auto", "tools": [],
        "top_p": 1.0, "truncation": "disabled", "user": None}


def test_the_response_echoes_the_settings_given():
    settings = {"instructions": "Be brief.", "max_output_tokens": 50, "metadata": {"k": "v"},
                "parallel_tool_calls": False, "previous_response_id": "resp_0",
                "reasoning": {"effort": "low", "summary": None}, "store": False, "temperature": 0.2,
                "text": {"format": {"type": "json_object"}}, "tool_choice": "required", "tools": [WEATHER_TOOL],
                "top_p": 0.5, "truncation": "auto", "user": "u-1"}
    obj = answer(completion("{}"), **settings)
    assert {key: obj[key] for key in settings} == settings
    parsed = Response.model_validate(obj)
    assert parsed.tools[0].name == "get_weather" and parsed.previous_response_id == "resp_0"


def test_an_answer_s_output_read_back_as_history_is_the_same_assistant_turn():
    reply = completion("Checking.", [chat_call("call_1")], "tool_calls")
    output = answer(reply)["output"]
    messages = chat_body(request([{"type": "function_call_output", "call_id": "call_1", "output": "18 C"}]),
                         [{"role": "user", "content": "Weather?"}, *output])["messages"]
    assert messages == [{"role": "user", "content": "Weather?"},
                        {"role": "assistant", "content": "Checking.", "tool_calls": [chat_call("call_1")]},
                        {"role": "tool", "tool_call_id": "call_1", "content": "18 C"}]


# -- the chat body as the chat adapters read it --------------------------------------------------

def conversation_request() -> dict:
    items = [{"role": "user", "content": [{"type": "input_text", "text": "Weather here?"},
                                          {"type": "input_image", "image_url": PNG_URL}]},
             {"role": "assistant", "content": "Checking."}, call_item("call_1"),
             {"type": "function_call_output", "call_id": "call_1", "output": "18 C"}]
    return request(items, instructions="Be brief.", tools=[WEATHER_TOOL], tool_choice="required",
                   max_output_tokens=200, parallel_tool_calls=False, reasoning={"effort": "low"})


def test_the_chat_body_is_what_the_anthropic_adapter_translates():
    translated = anthropic_wire.messages_body(chat_body(conversation_request()), "claude-haiku-4-5-20251001")
    assert translated["system"] == "Be brief." and translated["max_tokens"] == 200
    assert translated["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}
    assert [turn["role"] for turn in translated["messages"]] == ["user", "assistant", "user"]
    assert translated["messages"][1]["content"][1] == {"type": "tool_use", "id": "call_1", "name": "get_weather",
                                                       "input": {"city": "Paris"}}
    assert translated["messages"][2]["content"] == [{"type": "tool_result", "tool_use_id": "call_1",
                                                     "content": "18 C"}]


def test_the_chat_body_is_what_the_gemini_adapter_translates():
    translated = google_chat_request.generate_content_body(chat_body(conversation_request()))
    assert translated["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert translated["generationConfig"]["maxOutputTokens"] == 200
    assert translated["generationConfig"]["thinkingConfig"] == {"thinkingBudget": 1024}
    assert [turn["role"] for turn in translated["contents"]] == ["user", "model", "user"]
    assert translated["contents"][2]["parts"] == [{"functionResponse": {"name": "get_weather",
                                                                       "response": {"content": "18 C"}}}]
