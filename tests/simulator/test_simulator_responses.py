"""The simulator's POST /v1/responses, read with the openai SDK's own types and stream accumulator."""

import pytest

from simulator.textgen import completion_text

openai = pytest.importorskip("openai")

WEATHER = {"type": "function", "name": "get_weather",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}


@pytest.fixture
def client(simulator):
    return openai.AsyncOpenAI(base_url=str(simulator.make_url("/v1")), api_key="sk-test-key", max_retries=0)


async def test_a_response_has_the_chat_text_and_input_output_usage(client):
    response = await client.responses.create(model="gpt-4o-mini", input="one two three", instructions="be brief")
    assert response.status == "completed" and response.output_text == completion_text(16)
    assert (response.usage.input_tokens, response.usage.output_tokens) == (3 + 4 + 2 + 4, 16)


async def test_a_stream_is_numbered_and_accumulates_to_the_final_response(client):
    async with client.responses.stream(model="gpt-4o-mini", input="hi [sim:tokens=5]") as stream:
        events = [event async for event in stream]
        final = await stream.get_final_response()
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert final.output_text == completion_text(5) and events[-1].type == "response.completed"


async def test_a_tool_directive_answers_a_function_call(client):
    response = await client.responses.create(model="gpt-4o-mini", input="weather? [sim:tool=get_weather]",
                                             tools=[WEATHER])
    [call] = [item for item in response.output if item.type == "function_call"]
    assert call.name == "get_weather" and call.arguments == '{"city":"the quick brown fox"}'


async def test_max_output_tokens_cuts_the_response_incomplete(client):
    response = await client.responses.create(model="gpt-4o-mini", input="hi", max_output_tokens=4)
    assert response.status == "incomplete" and response.incomplete_details.reason == "max_output_tokens"


@pytest.mark.parametrize("extra", [{"previous_response_id": "resp_x"}, {"input": "[sim:tool=nothing]"}])
async def test_what_the_real_api_refuses_is_a_400(client, extra):
    with pytest.raises(openai.BadRequestError):
        await client.responses.create(**{"model": "gpt-4o-mini", "input": "hi", **extra})


async def test_an_error_directive_answers_its_status(client):
    with pytest.raises(openai.RateLimitError):
        await client.responses.create(model="gpt-4o-mini", input="hi [sim:status=429]")


async def test_a_tool_directive_is_not_repeated_once_the_function_answered(client):
    items = [{"role": "user", "content": "weather? [sim:tool=get_weather]"},
             {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{}"},
             {"type": "function_call_output", "call_id": "c1", "output": "sunny"}]
    response = await client.responses.create(model="gpt-4o-mini", input=items, tools=[WEATHER])
    assert [item.type for item in response.output] == ["message"]
