"""Property: whatever limit fields a body sets (absent, null, 0, 1, big, of the wrong type), on
every paid token route and every provider of every model the route serves, no usage that a
provider honouring the request AS IT IS SENT could report costs more than the request's ceiling.

What is sent is built by the gateway's own code: the route's (messages.Sent, responses.service.
Conversation) and the adapter's (`chat_request`, `messages_request`, ...). What a provider
honours in it is `ceiling_support`'s reading of each API. A body the edge refuses (a 400) is
never sent and costs nothing. The prompt may be anything up to the ceiling's prompt bound, except
where inputs are taken apart (embeddings, text completions): there each may fill a context.
"""

import msgspec
import pytest
from tests.gateway.billing.ceiling_support import (
    CATALOGUE, anthropic_messages, converse, each, gemini, openai_chat, openai_completions, openai_responses,
    sent_or_refused, served, services,
)
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gateway.chat import service as chat, completions
from gateway.embeddings import service as embeddings
from gateway.messages import service as messages
from gateway.realtime import session as realtime
from gateway.billing import ceilings
from gateway.billing.charging import price
from gateway.billing.pricing import Usage
from gateway.catalogue import Resolved
from gateway.chat.request import ChatRequest
from gateway.edge.errors import ApiError
from gateway.messages.request import MessagesRequest
from gateway.providers.anthropic.adapter import AnthropicProvider
from gateway.providers.base import ChatCall
from gateway.providers.bedrock.adapter import BedrockProvider
from gateway.providers.google.adapter import GoogleProvider
from gateway.providers.vertex.adapter import VertexProvider
from gateway.resolution import CHAT, COMPLETION, EMBEDDING, servers
from gateway.responses import translate
from gateway.responses.request import ResponsesRequest, check
from gateway.responses.service import Conversation

SERVICES = services()
LIMIT_FIELDS = ("max_tokens", "max_completion_tokens", "max_output_tokens", "max_response_output_tokens", "n",
                "best_of")
WRONG = st.sampled_from(["7", "70000", 7.0, 2.5, True, False, -3, [], {}, "x"])
VALUE = st.one_of(st.sampled_from([None, 0, 1, 2, 3, 7, 20, 128, 4096, 70_000, 10**9]), st.integers(0, 100_000),
                  st.integers(1, 20), WRONG)
LIMITS = st.fixed_dictionaries({}, optional=dict.fromkeys(LIMIT_FIELDS, VALUE))
TEXT = st.text(min_size=1, max_size=40)
SHARE = st.integers(0, 1000)  # per mille of a bound
SHARES = st.tuples(SHARE, SHARE, SHARE, SHARE)
WHOLE = (1000, 1000, 0, 1000)


def ids(kind: str) -> list[str]:
    return sorted({model.model_id for model in served(kind)})


CHAT_MODELS = pytest.mark.parametrize("model", ids("chat"))  # every provider of each is tried
RUNS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def valid(body: dict, schema: type) -> object | None:
    """`body` as the edge reads it (gateway.edge.bodies.parse_body), None when it refuses it."""
    try:
        return msgspec.convert(body, schema)
    except msgspec.ValidationError:
        return None


def worst_case_holds(shares: tuple[int, int, int, int], model: Resolved, ceiling: int, prompt: int, output: int
                     ) -> None:
    """Any usage of at most `prompt` and `output` tokens (`shares` of them), its prompt split
    between plain, cache written and cache read as the provider likes, costs at most `ceiling`;
    so do the dearest corners."""
    prompt_share, written_share, read_share, output_share = shares
    tokens = prompt * prompt_share // 1000
    written = tokens * written_share // 1000
    usage = Usage(tokens, output * output_share // 1000, (tokens - written) * read_share // 1000, written)
    for reported in (usage, Usage(prompt, output), Usage(prompt, output, 0, prompt)):
        cost = price(SERVICES, model, reported).inr_nano
        assert cost <= ceiling, (model.model_id, model.provider_id, reported, cost, ceiling)


def chat_reader(adapter: object):
    """What a chat adapter's API honours: Anthropic's Messages, Gemini's generateContent, else
    OpenAI's; Vertex's, whichever of the first two its body is (Claude's carries anthropic_version)."""
    if isinstance(adapter, AnthropicProvider):
        return anthropic_messages
    if isinstance(adapter, VertexProvider):
        return lambda wire, limit: (anthropic_messages if "anthropic_version" in wire else gemini)(wire, limit)
    if isinstance(adapter, BedrockProvider):
        return converse
    return gemini if isinstance(adapter, GoogleProvider) else openai_chat


# -- POST /v1/chat/completions -------------------------------------------------------------------

@CHAT_MODELS
@RUNS
@given(limits=LIMITS, stream=st.booleans(), shares=SHARES)
@example(limits={"max_output_tokens": 1}, stream=False, shares=WHOLE)  # the attack's
@example(limits={"max_tokens": 9, "max_completion_tokens": 90, "n": 3}, stream=True, shares=WHOLE)
def test_chat(model, limits, stream, shares):
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], **limits, "stream": stream}
    if (request := valid(body, ChatRequest)) is None:
        return
    candidates = servers(SERVICES, model, CHAT)
    try:
        usable = chat.with_token_limit(request)(candidates)
    except ApiError:
        return  # refused before any upstream call
    ceiling = chat.ceiling(SERVICES, body)
    for one in usable:
        call = ChatCall("r", one.model.upstream_model, body)
        if (wire := sent_or_refused(lambda one=one, call=call: one.provider.chat_request(call, stream))) is None:
            continue
        output = chat_reader(one.provider)(wire, ceilings.output_limit(one.model))
        worst_case_holds(shares, one.model, ceiling(one.model), ceilings.prompt_bound(one.model, body), output)


# -- POST /v1/messages ---------------------------------------------------------------------------

@CHAT_MODELS
@RUNS
@given(limits=LIMITS, stream=st.booleans(), shares=SHARES)
@example(limits={"max_tokens": 16_384, "max_completion_tokens": 1}, stream=False, shares=WHOLE)  # the attack's
def test_messages(model, limits, stream, shares):
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], **limits, "stream": stream}
    if valid(body, MessagesRequest) is None:
        return
    sent = messages.Sent(SERVICES, body)
    ceiling = sent.ceiling()
    for one in servers(SERVICES, model, CHAT):
        call = ChatCall("r", one.model.upstream_model, sent.to(one.model))
        native = sent.native(one.model)
        if native is not None:
            output = anthropic_messages(native.messages_request(call, stream), ceilings.output_limit(one.model))
        else:
            if (wire := sent_or_refused(lambda one=one, call=call: one.provider.chat_request(call, stream))) is None:
                continue
            output = chat_reader(one.provider)(wire, ceilings.output_limit(one.model))
        worst_case_holds(shares, one.model, ceiling(one.model), ceilings.prompt_bound(one.model, body), output)


# -- POST /v1/responses --------------------------------------------------------------------------

HISTORY = st.sampled_from([[], [{"type": "message", "role": "user", "content": "before"},
                                {"type": "message", "role": "assistant", "content": "yes"}]])


@CHAT_MODELS
@RUNS
@given(limits=LIMITS, stream=st.booleans(), history=HISTORY, shares=SHARES)
@example(limits={"max_tokens": 1}, stream=False, history=[], shares=WHOLE)  # the attack's
@example(limits={}, stream=False, history=[], shares=WHOLE)  # a default for Anthropic
def test_responses(model, limits, stream, history, shares):
    body = {"model": model, "input": "hi", **limits, "stream": stream}
    if (request := valid(body, ResponsesRequest)) is None:
        return
    check(request)
    items = [*history, *translate.input_items(body["input"], bool(history))]
    conversation = Conversation(SERVICES, None, body, history, items)  # type: ignore[arg-type]  # no route needed
    ceiling = conversation.ceiling()
    for one in servers(SERVICES, model, CHAT):
        call = ChatCall("r", one.model.upstream_model, conversation.sent(one.model))
        native = conversation.native(one.model)
        if native is not None:
            output = openai_responses(native.response_request(call, stream), ceilings.output_limit(one.model))
        else:
            if (wire := sent_or_refused(lambda one=one, call=call: one.provider.chat_request(call, stream))) is None:
                continue
            output = chat_reader(one.provider)(wire, ceilings.output_limit(one.model))
        prompt = ceilings.prompt_bound(one.model, [body, history])
        worst_case_holds(shares, one.model, ceiling(one.model), prompt, output)


# -- POST /v1/completions ------------------------------------------------------------------------

PROMPT = st.one_of(TEXT, st.lists(TEXT, min_size=1, max_size=20), st.lists(st.integers(0, 50_000), min_size=1),
                   st.lists(st.lists(st.integers(0, 50_000), min_size=1, max_size=5), min_size=1, max_size=20))


@pytest.mark.parametrize("model", ids("completion"))
@RUNS
@given(limits=LIMITS, prompt=PROMPT, stream=st.booleans(), shares=SHARES)
@example(limits={"max_tokens": 7, "best_of": 5}, prompt="hi", stream=False, shares=WHOLE)  # the attack's
@example(limits={"max_tokens": 7}, prompt=["a"] * 20, stream=False, shares=WHOLE)
def test_completions(model, limits, prompt, stream, shares):
    body = {"model": model, "prompt": prompt, **limits, "stream": stream}
    if valid(body, completions.CompletionRequest) is None:
        return
    ceiling = completions.ceiling(SERVICES, body)
    for one in servers(SERVICES, model, COMPLETION):
        wire = one.provider.completion_request(ChatCall("r", one.model.upstream_model, body), stream)
        output = openai_completions(wire, ceilings.output_limit(one.model))
        worst_case_holds(shares, one.model, ceiling(one.model), each_on_its_own(one.model, prompt), output)


def each_on_its_own(model: Resolved, prompt: object) -> int:
    """Each prompt (or input) is at most its own bytes as tokens, and at most a context."""
    items = prompt if isinstance(prompt, list) and not all(isinstance(item, int) for item in prompt) else [prompt]
    return sum(min(len(item.encode()) if isinstance(item, str) else len(item), model.record.context_length)
               for item in items)


# -- POST /v1/embeddings -------------------------------------------------------------------------

INPUT = st.one_of(st.text(min_size=1, max_size=3000), st.lists(st.text(min_size=1, max_size=300), min_size=1),
                  st.lists(st.lists(st.integers(0, 100_000), min_size=1, max_size=9000), min_size=1, max_size=4))


@pytest.mark.parametrize("model", ids("embedding"))
@RUNS
@given(value=INPUT, shares=SHARES)
@example(value=["x " * 4000] * 3, shares=WHOLE)  # the attack's
def test_embeddings(model, value, shares):
    body = {"model": model, "input": value}
    if valid(body, embeddings.EmbeddingRequest) is None:
        return
    try:
        items = embeddings.inputs_of(value)
    except ApiError:
        return
    ceiling = embeddings.ceiling(SERVICES, items)
    for one in servers(SERVICES, model, EMBEDDING):
        worst_case_holds(shares, one.model, ceiling(one.model), each_on_its_own(one.model, value), 0)


# -- GET /v1/realtime ----------------------------------------------------------------------------

@RUNS
@given(model=st.sampled_from(served("realtime")), client_bytes=st.integers(0, 300_000),
       spent=st.tuples(st.integers(0, 10**6), st.integers(0, 10**5)),
       responses=st.lists(st.tuples(SHARE, SHARE), min_size=1, max_size=40))
@example(model=CATALOGUE.resolve("gpt-4o-realtime-preview"), client_bytes=2_000, spent=(0, 0),
         responses=[(1000, 1000)] * 12)  # the attack's: 12 responses queued at once
def test_realtime(model, client_bytes, spent, responses):
    """A session holding for its pending responses covers any such responses: each writes at
    most the model's output limit, and reads at most what the client sent and every response
    before it wrote (its own answers included), never beyond the context."""
    usage = Usage(*spent)
    ceiling = realtime.session_ceiling(SERVICES, model, client_bytes, usage, len(responses))
    for shares in (responses, [(1000, 1000)] * len(responses)):
        total = usage
        for heard_share, output_share in shares:
            heard = min(client_bytes + total.completion_tokens, model.record.context_length)
            total = Usage(total.prompt_tokens + heard * heard_share // 1000,
                          total.completion_tokens + ceilings.output_limit(model) * output_share // 1000)
        assert price(SERVICES, model, total).inr_nano <= ceiling


def test_every_chat_api_and_route_kind_is_exercised():
    """The chat models reach all three chat APIs, so each reading above is tried."""
    adapters = {type(one.provider) for model in ids("chat") for one in servers(SERVICES, model, CHAT)}
    assert {AnthropicProvider, GoogleProvider, VertexProvider, BedrockProvider} < adapters  # and OpenAI-shaped ones
    assert all(served(kind) for kind in ("completion", "embedding", "realtime"))
    assert each(16_384, 7, None, "9") == 9 and each(16_384, 7, "x") == 16_384  # unreadable: the model's own
