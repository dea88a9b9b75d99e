"""litellm as a client library: OpenAI-compatible and Anthropic routes, and embeddings."""

import json
import os

import litellm

url, key = os.environ["GATEWAY_URL"], os.environ["GATEWAY_KEY"]
messages = [{"role": "user", "content": "hello"}]
openai_reply = litellm.completion(model="openai/gpt-4o-mini", api_base=url + "/v1", api_key=key, messages=messages)
stream = litellm.completion(model="openai/gemini-2.5-flash", api_base=url + "/v1", api_key=key, messages=messages,
                            stream=True)
anthropic_reply = litellm.completion(model="anthropic/claude-haiku-4-5", api_base=url, api_key=key,
                                     messages=messages, max_tokens=64)
embedding = litellm.embedding(model="openai/text-embedding-3-small", api_base=url + "/v1", api_key=key,
                              input=["hello"])
print(json.dumps({
    "openai": openai_reply.choices[0].message.content,
    "stream": "".join(chunk.choices[0].delta.content or "" for chunk in stream),
    "anthropic": anthropic_reply.choices[0].message.content,
    "embedding_dims": len(embedding.data[0]["embedding"]),
}))
