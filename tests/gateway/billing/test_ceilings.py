"""What a request holds (gateway.billing.ceilings), rule by rule: the prompt bound at the dearest
prompt price, and the output the request AS IT IS SENT lets the provider that answers write, per
route and per provider; realtime sessions hold for every pending response.
(The same, for any body: test_ceiling_properties.)"""

from decimal import Decimal

import pytest
from tests.gateway.billing.ceiling_support import CATALOGUE, services

from gateway.chat import service as chat, completions
from gateway.embeddings import service as embeddings
from gateway.messages import service as messages
from gateway.realtime import session as realtime
from gateway.billing import ceilings
from gateway.billing.charging import price
from gateway.billing.pricing import Usage
from gateway.edge.errors import ApiError
from gateway.providers.base import Allowance, limit
from gateway.responses.service import DEFAULT_MAX_OUTPUT_TOKENS, Conversation

SERVICES = services()
HAIKU, MINI = CATALOGUE.resolve("claude-haiku-4-5"), CATALOGUE.resolve("gpt-4o-mini")
GEMINI, OSS = CATALOGUE.resolve("gemini-2.5-flash"), CATALOGUE.resolve("groq/gpt-oss-120b")
HI = [{"role": "user", "content": "hi"}]


def output(ceiling, model, prompt: object) -> int:
    """The output tokens a ceiling holds for, once the prompt bound is taken off it."""
    worst = ceiling(model) - ceilings.tokens(SERVICES, model, ceilings.prompt_bound(model, prompt), 0)
    return worst // ceilings.tokens(SERVICES, model, 0, 1) if worst else 0


def test_a_token_priced_ceiling_is_the_prompt_bound_and_the_allowed_output_at_the_dearest_prices():
    body = {"model": "claude-haiku-4-5", "messages": HI, "max_tokens": 100}  # haiku's 1h cache writes cost most
    prompt = ceilings.prompt_bound(HAIKU, body)
    assert prompt == len(b'{"model":"claude-haiku-4-5","messages":[{"role":"user","content":"hi"}],"max_tokens":100}')
    expected = (prompt * Decimal("0.000002") + 100 * Decimal("0.000005")) * 84
    assert chat.ceiling(SERVICES, body)(HAIKU) == int(expected * 10**9)
    unbounded = ceilings.worst(SERVICES, HAIKU, prompt, Allowance())  # no limit sent: the model's own
    assert unbounded == int((prompt * Decimal("0.000002") + 64_000 * Decimal("0.000005")) * 84 * 10**9)


@pytest.mark.parametrize(("fields", "model", "tokens"), [
    ({"max_tokens": 9, "max_completion_tokens": 7}, MINI, 9),  # both go up: either may be the one honoured
    ({"max_tokens": 9, "max_completion_tokens": 7}, HAIKU, 7),  # translated: the tighter goes up
    ({"max_tokens": 9, "max_completion_tokens": 7}, GEMINI, 7),
    ({"max_output_tokens": 1, "max_response_output_tokens": 1}, MINI, 16_384),  # not chat's: the model's own
    ({"max_output_tokens": 1}, GEMINI, 65_536),
    ({"max_tokens": 100, "n": 3}, MINI, 300),  # n answers
    ({"max_tokens": 100, "n": 3}, GEMINI, 300),  # n candidates
    ({"max_tokens": 100, "n": 3}, HAIKU, 100),  # Anthropic is not sent n: one answer
    ({"max_tokens": 100, "best_of": 5}, OSS, 100),  # not chat's
    ({"max_tokens": 10**9}, MINI, 16_384),  # never past the model's own limit
])
def test_chat_holds_the_output_each_provider_is_sent(fields, model, tokens):
    body = {"model": model.model_id, "messages": HI, **fields}
    assert output(chat.ceiling(SERVICES, body), model, body) == tokens


@pytest.mark.parametrize(("fields", "model", "tokens"), [
    ({"max_tokens": 16_384, "max_completion_tokens": 1}, HAIKU, 16_384),  # the body goes up as it is
    ({"max_tokens": 16_384, "max_completion_tokens": 1, "n": 4}, MINI, 16_384),  # translated: max_tokens alone
    ({"max_tokens": 500, "max_completion_tokens": 1}, GEMINI, 500),
])
def test_messages_holds_the_output_each_provider_is_sent(fields, model, tokens):
    body = {"model": model.model_id, "messages": HI, **fields}
    assert output(messages.Sent(SERVICES, body).ceiling(), model, body) == tokens


@pytest.mark.parametrize(("fields", "model", "tokens"), [
    ({"max_tokens": 1}, MINI, 16_384),  # the Responses API reads max_output_tokens only
    ({"max_output_tokens": 40, "max_tokens": 1}, MINI, 40),
    ({"max_tokens": 1}, HAIKU, DEFAULT_MAX_OUTPUT_TOKENS),  # the limit the translation fills in
    ({"max_output_tokens": 40}, HAIKU, 40),
    ({"max_tokens": 1}, GEMINI, 65_536),  # translated without a limit: the model's own
])
def test_responses_hold_the_output_each_provider_is_sent(fields, model, tokens):
    body = {"model": model.model_id, "input": "hi", **fields}
    history = [{"role": "user", "content": "before"}]
    ceiling = Conversation(SERVICES, None, body, history, []).ceiling()  # type: ignore[arg-type]  # no route
    assert output(ceiling, model, [body, history]) == tokens


def test_completions_hold_max_tokens_for_every_candidate_of_every_prompt_and_each_prompt_may_fill_a_context():
    instruct = CATALOGUE.resolve("gpt-3.5-turbo-instruct")  # a context of 4,096
    body = {"model": instruct.model_id, "prompt": ["x " * 3_000] * 3, "max_tokens": 10, "n": 2, "best_of": 5}
    rest = len(b'{"model":"gpt-3.5-turbo-instruct","max_tokens":10,"n":2,"best_of":5}')
    expected = ceilings.tokens(SERVICES, instruct, 3 * 4_096, 3 * 5 * 10)
    assert completions.ceiling(SERVICES, body)(instruct) == expected
    one = {**body, "prompt": "x " * 10, "best_of": 1}  # n=2, one prompt
    assert completions.ceiling(SERVICES, one)(instruct) == ceilings.tokens(SERVICES, instruct, 20 + rest, 20)
    tokens = {**one, "prompt": [1, 2, 3]}  # one prompt of token ids
    assert completions.ceiling(SERVICES, tokens)(instruct) == ceilings.tokens(SERVICES, instruct, 7 + rest, 20)


def test_embeddings_bound_each_input_by_its_own_bytes_and_the_context():
    small = CATALOGUE.resolve("text-embedding-3-small")  # a context of 8,191
    items = embeddings.inputs_of(["é" * 5_000, "a", [1, 2, 3]] * 2)
    assert ceilings.inputs_bound(small, items) == 2 * (8_191 + 1 + 7)  # é is two bytes
    assert embeddings.ceiling(SERVICES, items)(small) == ceilings.tokens(SERVICES, small, 2 * (8_191 + 8), 0)
    assert ceilings.size("é") == 2 and ceilings.size(b"ab") == 2 and ceilings.size({"a": 1}) == 7


def test_a_limit_is_the_largest_given_and_a_count_a_whole_number():
    assert limit(7, None, 9) == 9 and limit(None, None) is None
    assert limit(7, True) is None and limit(7, "9") is None  # one a provider may read as anything
    assert Allowance().answers == 1
    with pytest.raises(ApiError, match="n must be"):
        chat.ceiling(SERVICES, {"messages": HI, "n": "3"})(MINI)


def test_the_output_limit_is_the_catalogues_else_the_context_and_a_prompt_never_passes_the_context():
    assert ceilings.output_limit(MINI) == 16_384
    assert ceilings.output_limit(CATALOGUE.resolve("gpt-4o-realtime-preview")) == 4_096
    assert ceilings.output_limit(CATALOGUE.resolve("text-embedding-3-small")) == 8_191  # no limit: its context
    assert ceilings.prompt_bound(CATALOGUE.resolve("gpt-3.5-turbo-0613"), "x" * 10_000) == 4_096


def test_a_bound_over_what_was_spent_is_priced_as_one_usage():
    """What was spent at its prices; the prompt to come at the dearest a prompt token has (Haiku's
    one-hour cache write), the output at the completion price."""
    spent = Usage(1_001, 333, 500, 0)
    assert HAIKU.prices.per_token.cache_write_1h_usd > HAIKU.prices.per_token.cache_write_usd
    bound = price(SERVICES, HAIKU, Usage(1_008, 344, 500, cache_write_1h_tokens=7))
    assert ceilings.tokens(SERVICES, HAIKU, 7, 11, spent) == bound.inr_nano


def test_a_realtime_session_holds_every_pending_response_each_reading_what_those_before_wrote():
    model = CATALOGUE.resolve("gpt-4o-realtime-preview")  # 4,096 output tokens, a context of 128,000
    spent = Usage(300, 40)
    inputs = sum(min(1_000 + 40 + j * 4_096, 128_000) for j in range(40))  # some reach the context
    expected = ceilings.tokens(SERVICES, model, inputs, 40 * 4_096, spent)
    assert realtime.session_ceiling(SERVICES, model, 1_000, spent, 40) == expected
    assert realtime.growing_sum(5, 3, 4, 12) == 5 + 8 + 11 + 12 and realtime.growing_sum(5, 3, 2, 0) == 13
