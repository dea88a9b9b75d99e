"""Chat chunks into Responses stream events, without HTTP: every event validates as the openai
SDK's stream event union, and the SDK's own stream accumulator (what `client.responses.stream()`
runs) rebuilds the final response from them."""

import pydantic
import pytest
from openai import omit
from openai._models import construct_type
from openai.lib.streaming.responses._responses import ResponseStreamState
from openai.types.responses import ResponseStreamEvent

from gateway.billing.pricing import Usage
from gateway.responses.translate import usage_object
from gateway.responses.translate_stream import ResponsesEventEncoder

EVENT = pydantic.TypeAdapter(ResponseStreamEvent)
REQUEST = {"model": "gemini-2.5-flash", "input": "Weather?", "stream": True, "instructions": "Be brief.",
           "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}]}


def encoder() -> ResponsesEventEncoder:
    return ResponsesEventEncoder(response_id="resp_1", model="gemini-2.5-flash", created_at=1_700_000_000,
                                 request=REQUEST)


def text(content: str, finish_reason: str | None = None) -> dict:
    return {"id": "c", "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": finish_reason}]}


def call(index: int, call_id: str | None = None, name: str | None = None, arguments: str = "") -> dict:
    head = {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}} if name else \
        {"function": {"arguments": arguments}}
    return {"id": "c", "choices": [{"index": 0, "delta": {"tool_calls": [{"index": index, **head}]}}]}


def stream(chunks: list[dict], usage: Usage | None = None, finish_reason: str | None = "stop",
           events_of: ResponsesEventEncoder | None = None) -> list[dict]:
    events_of = events_of or encoder()
    events = events_of.opening()
    for chunk in chunks:
        events += events_of.feed(chunk)
    return events + events_of.closing(usage or Usage(12, 7), finish_reason)


def accumulated(events: list[dict]) -> list:
    """The SDK's view: every event validated, then fed to its stream state; its final events."""
    state, final = ResponseStreamState(input_tools=omit, text_format=omit), []
    for event in events:
        EVENT.validate_python(event)
        final = state.handle_event(construct_type(type_=ResponseStreamEvent, value=event))
    return final


def test_a_text_answer_streams_its_message_item_in_order():
    source = encoder()
    events = stream([text("Sunny"), text(", 20 C"), text("", "stop")], events_of=source)
    assert [event["sequence_number"] for event in events] == list(range(len(events)))
    assert [event["type"] for event in events] == [
        "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
        "response.output_text.delta", "response.output_text.delta", "response.output_text.done",
        "response.content_part.done", "response.output_item.done", "response.completed"]
    item_id = events[2]["item"]["id"]
    place = {"item_id": item_id, "output_index": 0, "content_index": 0}
    assert events[2]["item"] == {"id": item_id, "type": "message", "role": "assistant", "status": "in_progress",
                                 "content": []}
    assert events[4] == {"type": "response.output_text.delta", "sequence_number": 4, **place, "delta": "Sunny",
                         "logprobs": []}
    assert events[6] == {"type": "response.output_text.done", "sequence_number": 6, **place,
                         "text": "Sunny, 20 C", "logprobs": []}
    done_part = {"type": "output_text", "text": "Sunny, 20 C", "annotations": [], "logprobs": []}
    assert events[7]["part"] == done_part and events[8]["item"]["content"] == [done_part]
    assert events[8]["item"]["status"] == "completed" and source.output_text == "Sunny, 20 C"
    final = accumulated(events)[-1].response
    assert final.output_text == "Sunny, 20 C" and final.status == "completed"
    assert final.usage.model_dump(exclude_none=True) == usage_object(Usage(12, 7))


def test_the_opening_events_carry_the_response_in_progress():
    opening = encoder().opening()
    assert [event["type"] for event in opening] == ["response.created", "response.in_progress"]
    for event in opening:
        response = event["response"]
        assert (response["id"], response["status"], response["output"], response["usage"]) == \
               ("resp_1", "in_progress", [], None)
        assert response["instructions"] == "Be brief." and response["tools"] == REQUEST["tools"]


def test_text_then_tool_calls_each_close_before_the_next_opens():
    chunks = [text("Let me check."), call(0, "call_1", "get_weather", ""), call(0, arguments='{"city":'),
              call(0, arguments='"Paris"}'), call(1, "call_2", "get_weather", '{"city":"Lyon"}')]
    events = stream(chunks, finish_reason="tool_calls")
    kinds = [event["type"] for event in events]
    assert kinds[2:] == [
        "response.output_item.added", "response.content_part.added", "response.output_text.delta",
        "response.output_text.done", "response.content_part.done", "response.output_item.done",
        "response.output_item.added", "response.function_call_arguments.delta",
        "response.function_call_arguments.delta", "response.function_call_arguments.done",
        "response.output_item.done",
        "response.output_item.added", "response.function_call_arguments.delta",
        "response.function_call_arguments.done", "response.output_item.done", "response.completed"]
    first_call = events[8]["item"]
    assert first_call == {"id": first_call["id"], "type": "function_call", "status": "in_progress",
                          "call_id": "call_1", "name": "get_weather", "arguments": ""}
    assert events[11] == {"type": "response.function_call_arguments.done", "sequence_number": 11,
                          "item_id": first_call["id"], "output_index": 1, "arguments": '{"city":"Paris"}'}
    final = events[-1]["response"]
    assert [item["id"] for item in final["output"]] == [events[index]["item"]["id"] for index in (2, 8, 13)]
    assert [item["status"] for item in final["output"]] == ["completed"] * 3
    response = accumulated(events)[-1].response
    assert response.output_text == "Let me check."
    assert [(item.call_id, item.arguments) for item in response.output[1:]] == [
        ("call_1", '{"city":"Paris"}'), ("call_2", '{"city":"Lyon"}')]


@pytest.mark.parametrize(("finish_reason", "reason"), [("length", "max_output_tokens"),
                                                         ("content_filter", "content_filter")])
def test_a_cut_stream_ends_incomplete(finish_reason, reason):
    events = stream([text("Once upon")], finish_reason=finish_reason)
    assert events[-2]["item"]["status"] == "incomplete"
    assert events[-1]["type"] == "response.incomplete"
    assert (events[-1]["response"]["status"], events[-1]["response"]["incomplete_details"]) == \
           ("incomplete", {"reason": reason})
    assert accumulated(events)[-1].response.incomplete_details.reason == reason


def test_the_finish_reason_of_the_chunks_counts_when_closing_is_given_none():
    events = stream([text("Once", "length")], finish_reason=None)
    assert events[-1]["response"]["incomplete_details"] == {"reason": "max_output_tokens"}


def test_an_empty_answer_still_completes():
    events = stream([{"id": "c", "choices": []}, {"id": "c", "choices": [], "usage": {"prompt_tokens": 3}}],
                    usage=Usage(3, 0))
    assert [event["type"] for event in events] == ["response.created", "response.in_progress",
                                                   "response.completed"]
    assert events[-1]["response"]["output"] == [] and events[-1]["response"]["usage"]["input_tokens"] == 3
    assert accumulated(events)[-1].response.output == []


def test_a_tool_call_without_an_id_gets_one():
    events = stream([call(0, None, "get_weather", "{}")], finish_reason="tool_calls")
    assert events[2]["item"]["call_id"].startswith("call_")
    assert events[-1]["response"]["output"][0]["call_id"] == events[2]["item"]["call_id"]
    accumulated(events)


def test_text_after_a_tool_call_opens_a_new_message():
    events = stream([text("A"), call(0, "call_1", "get_weather", "{}"), text("B")])
    messages = [item for item in events[-1]["response"]["output"] if item["type"] == "message"]
    assert [item["content"][0]["text"] for item in messages] == ["A", "B"]
    assert [item["output_index"] for item in events if item["type"] == "response.output_item.added"] == [0, 1, 2]
    assert accumulated(events)[-1].response.output_text == "AB"
