"""The official openai SDK drives chat on all three providers through one gateway, JSON and
streamed, and the balance falls by exactly the sum of the reported costs."""

from decimal import Decimal

import pytest

openai = pytest.importorskip("openai")

MODELS = ["gpt-4o-mini", "claude-haiku-4-5", "gemini-2.5-flash", "anthropic/claude-haiku-4-5",
          "google/gemini-2.5-flash"]


@pytest.fixture
def client(gateway, org):
    return openai.AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=org["api_key"], max_retries=0)


def ask(model: str, words: int) -> dict:
    return {"model": model, "max_tokens": 64,
            "messages": [{"role": "system", "content": "Be brief."},
                         {"role": "user", "content": f"hello [sim:tokens={words}]"}]}


@pytest.mark.parametrize("model", MODELS)
async def test_json_and_streamed_chat_on_every_provider_bill_exactly(client, gateway, org, model):
    reply = await client.chat.completions.create(**ask(model, 5))
    assert reply.choices[0].message.content and reply.usage.completion_tokens == 5
    stream = await client.chat.completions.create(**ask(model, 3), stream=True,
                                                  stream_options={"include_usage": True})
    chunks = [chunk async for chunk in stream]
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert chunks[-1].usage.completion_tokens == 3
    costs = [reply.usage.model_extra["cost_inr"], chunks[-1].usage.model_extra["cost_inr"]]
    assert all(cost > 0 for cost in costs)
    assert await gateway.balance(org["org_id"]) == Decimal(100) - sum(Decimal(str(c)) for c in costs)
