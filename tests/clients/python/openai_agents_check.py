"""The OpenAI Agents SDK in its default configuration (the Responses API), with a function tool."""

import asyncio
import json
import os

from agents import Agent, Runner, function_tool, set_default_openai_client, set_tracing_disabled
from openai import AsyncOpenAI


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


async def main() -> None:
    set_tracing_disabled(True)  # tracing would send spans to OpenAI: no network here
    set_default_openai_client(AsyncOpenAI(base_url=os.environ["GATEWAY_URL"] + "/v1",
                                          api_key=os.environ["GATEWAY_KEY"]))
    agent = Agent(name="helper", instructions="Use the tool.", model="gpt-4o-mini", tools=[get_weather])
    result = await Runner.run(agent, "Weather in Paris? [sim:tool=get_weather]")
    calls = [item.type for item in result.new_items]
    print(json.dumps({"output": result.final_output, "items": calls}))


asyncio.run(main())
