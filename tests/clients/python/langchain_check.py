"""langchain-openai and langchain-anthropic chat models, whole and streamed."""

import json
import os

from langchain_anthropic import ChatAnthropic
from langchain_openai import ChatOpenAI

url, key = os.environ["GATEWAY_URL"], os.environ["GATEWAY_KEY"]
openai_chat = ChatOpenAI(model="gpt-4o-mini", base_url=url + "/v1", api_key=key)
anthropic_chat = ChatAnthropic(model="claude-haiku-4-5", base_url=url, api_key=key)
print(json.dumps({
    "openai": openai_chat.invoke("hello").content,
    "openai_stream": "".join(str(chunk.content) for chunk in openai_chat.stream("hello")),
    "anthropic": anthropic_chat.invoke("hello").content,
    "anthropic_stream": "".join(str(chunk.content) for chunk in anthropic_chat.stream("hello")),
}))
