"""pydantic-ai with its OpenAI Responses model (its default for OpenAI) and its chat model."""

import json
import os

from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
from pydantic_ai.providers.openai import OpenAIProvider

provider = OpenAIProvider(base_url=os.environ["GATEWAY_URL"] + "/v1", api_key=os.environ["GATEWAY_KEY"])
responses = Agent(OpenAIResponsesModel("gpt-4o-mini", provider=provider)).run_sync("hello")
# Not Claude: spec 7 makes chat without max_tokens a 400 for Anthropic models, and this client sends none.
chat = Agent(OpenAIChatModel("gemini-2.5-flash", provider=provider)).run_sync("hello")
print(json.dumps({"responses": responses.output, "chat": chat.output}))
