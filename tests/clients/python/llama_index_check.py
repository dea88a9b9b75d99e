"""llama-index's OpenAI LLM: a completion and a chat, whole and streamed."""

import json
import os

from llama_index.core.llms import ChatMessage
from llama_index.llms.openai import OpenAI

llm = OpenAI(model="gpt-4o-mini", api_base=os.environ["GATEWAY_URL"] + "/v1", api_key=os.environ["GATEWAY_KEY"])
print(json.dumps({
    "complete": llm.complete("hello").text,
    "chat": llm.chat([ChatMessage(role="user", content="hello")]).message.content,
    "stream": "".join(part.delta or "" for part in llm.stream_complete("hello")),
}))
