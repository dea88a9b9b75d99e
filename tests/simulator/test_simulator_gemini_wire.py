"""The Gemini simulator's request parsing: a music model's request and a chat model's request
share their contents but not their generationConfig, which each validates its own way."""

import pytest

from simulator.gemini_wire import (
    ChatRequest,
    GenerateContentRequest,
    GenerationConfig,
    InvalidArgument,
    parse_chat_request,
    parse_generate_content,
)

CONTENTS = [{"role": "user", "parts": [{"text": "a song about the sea"}]}]


def test_a_music_request_keeps_any_generation_config_object_and_ignores_unknown_fields():
    request = parse_generate_content({"contents": CONTENTS, "generationConfig": {"anything": 1}, "extra": True})
    assert isinstance(request, GenerateContentRequest)
    assert request.generation_config == {"anything": 1}
    assert request.contents[0].parts[0].text == "a song about the sea"


def test_a_music_request_refuses_a_generation_config_that_is_not_an_object():
    with pytest.raises(InvalidArgument, match="generationConfig"):
        parse_generate_content({"contents": CONTENTS, "generationConfig": "loud"})


def test_a_chat_request_reads_its_generation_config_by_name():
    request = parse_chat_request({"contents": CONTENTS, "generationConfig": {"maxOutputTokens": 5}})
    assert isinstance(request, ChatRequest)
    assert request.generation_config == GenerationConfig(max_output_tokens=5)


@pytest.mark.parametrize("body", [
    {"contents": CONTENTS, "extra": True},
    {"contents": CONTENTS, "generationConfig": {"anything": 1}},
    {"contents": []},
    None,
])
def test_a_chat_request_refuses_unknown_fields_and_empty_contents(body):
    with pytest.raises(InvalidArgument):
        parse_chat_request(body)


def test_both_parsers_refuse_a_part_holding_two_kinds_of_data():
    two = [{"parts": [{"text": "x", "functionCall": {"name": "f"}}]}]
    for parse in (parse_generate_content, parse_chat_request):
        with pytest.raises(InvalidArgument, match="exactly one"):
            parse({"contents": two})
