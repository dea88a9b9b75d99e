"""The tier a provider says it served and its one-hour cache writes, read into Usage from each
protocol's exact wire (Anthropic's `cache_creation` and `service_tier`, OpenAI's top-level
`service_tier`, Bedrock's `cacheDetails` and `serviceTier`), and every hostile report of them
refused as an invalid usage report (a 502, never billed)."""

import re

import orjson
import pytest

from gateway.edge import sse
from gateway.edge.errors import ApiError, UpstreamError
from gateway.messages import wire as messages_wire
from gateway.providers.anthropic import wire as anthropic
from gateway.providers.bedrock import answers as bedrock
from gateway.providers.bedrock import converse
from gateway.providers.bedrock.events import ConverseChunks
from gateway.providers.openai import adapter as openai
from gateway.providers.openai.responses import response_reply
from gateway.providers.usage import Usage, checked_usage, five_minute_writes, served_tier
from gateway.responses.translate import chat_body as responses_chat_body

HOSTILE_COUNTS = [-1, True, 2.5, "7", 10**8 + 1, [3], {"n": 3}]
HOSTILE_TIERS = ["weird tier!", "", " priority", "priority\n", "9lives", "x" * 33, 3, True, ["flex"], {"t": 1}]


def invalid(words: str = "invalid usage report"):
    """A 502 UpstreamError whose message holds `words`."""
    return pytest.raises(UpstreamError, match=re.escape(words))


# -- the rules every adapter reads through (gateway.providers.usage) ---------------------------------

@pytest.mark.parametrize(("reported", "tier"), [
    (None, ""), ("default", ""), ("auto", ""), ("standard", ""), ("STANDARD", ""), ("on_demand", ""),
    ("flex", "flex"), ("PRIORITY", "priority"), ("Scale", "scale"), ("batch", "batch"), ("reserved", "reserved"),
    ("tier_2", "tier_2"), ("x" * 32, "x" * 32)])
def test_a_served_tier_is_named_in_lower_case_and_the_standard_one_is_empty(reported, tier):
    assert served_tier("p", reported) == tier


@pytest.mark.parametrize("reported", HOSTILE_TIERS)
def test_a_tier_that_is_not_a_short_identifier_is_an_invalid_report(reported):
    with invalid("p sent an invalid usage report: service tier is"):
        served_tier("p", reported)


def test_the_cache_parts_are_disjoint_and_together_within_the_prompt():
    assert checked_usage("p", Usage(10, 1, 3, 3, 4, "flex")) == Usage(10, 1, 3, 3, 4, "flex")
    with invalid("3 cached and 8 cache-written tokens exceed the 10 prompt tokens"):
        checked_usage("p", Usage(10, 1, 3, 4, 4))
    for count in (-1, True, 10**8 + 1):
        with invalid("out of bounds"):
            checked_usage("p", Usage(10, 1, cache_write_1h_tokens=count))  # type: ignore[arg-type]


@pytest.mark.parametrize("tier", ["default", "PRIORITY", "weird tier!"])
def test_a_usage_whose_tier_is_not_a_served_tiers_name_is_refused(tier):
    with invalid("service tier"):
        checked_usage("p", Usage(10, 1, service_tier=tier))


def test_one_hour_writes_are_part_of_all_writes():
    assert five_minute_writes("p", 30, 20) == 10 and five_minute_writes("p", 5, 0) == 5
    with invalid("21 one-hour cache writes exceed the 20 written"):
        five_minute_writes("p", 20, 21)


# -- Anthropic (and Claude on Vertex, read by the same code) -----------------------------------------

ANTHROPIC_USAGE = {"input_tokens": 10, "cache_read_input_tokens": 5, "cache_creation_input_tokens": 30,
                   "cache_creation": {"ephemeral_5m_input_tokens": 10, "ephemeral_1h_input_tokens": 20},
                   "output_tokens": 7, "service_tier": "priority"}


def test_anthropic_usage_splits_the_writes_by_lifetime_and_reads_the_served_tier():
    assert anthropic.usage_of(ANTHROPIC_USAGE) == Usage(45, 7, 5, 10, 20, "priority")
    assert anthropic.usage_of({**ANTHROPIC_USAGE, "service_tier": "standard"}).service_tier == ""
    assert anthropic.usage_of({**ANTHROPIC_USAGE, "service_tier": "BATCH"}).service_tier == "batch"
    without_split = {k: v for k, v in ANTHROPIC_USAGE.items() if k != "cache_creation"}
    assert anthropic.usage_of(without_split) == Usage(45, 7, 5, 30, 0, "priority")  # unstated: five-minute
    assert anthropic.usage_of({**ANTHROPIC_USAGE, "cache_creation": None}).cache_write_1h_tokens == 0


@pytest.mark.parametrize("field", ["ephemeral_1h_input_tokens", "ephemeral_5m_input_tokens"])
@pytest.mark.parametrize("count", HOSTILE_COUNTS)
def test_anthropic_hostile_cache_creation_counts_are_invalid(field, count):
    with invalid(f"anthropic sent an invalid usage report: {field} is"):
        anthropic.usage_of({**ANTHROPIC_USAGE, "cache_creation": {**ANTHROPIC_USAGE["cache_creation"], field: count}})


def test_anthropic_more_one_hour_writes_than_writes_or_a_broken_split_is_invalid():
    with invalid("31 one-hour cache writes exceed the 30 written"):
        anthropic.usage_of({**ANTHROPIC_USAGE, "cache_creation": {"ephemeral_1h_input_tokens": 31}})
    with invalid("cache_creation is"):
        anthropic.usage_of({**ANTHROPIC_USAGE, "cache_creation": [20]})


@pytest.mark.parametrize("tier", HOSTILE_TIERS)
def test_anthropic_hostile_tiers_are_invalid(tier):
    with invalid("service tier is"):
        anthropic.usage_of({**ANTHROPIC_USAGE, "service_tier": tier})


def test_anthropic_answers_translated_to_chat_say_the_tier_served_by_openais_name():
    message = {"id": "m", "model": "c", "content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn"}
    assert anthropic.completion({**message, "usage": ANTHROPIC_USAGE}, 0)["service_tier"] == "priority"
    assert anthropic.completion({**message, "usage": {"service_tier": "standard"}}, 0)["service_tier"] == "default"
    translator = anthropic.AnthropicEventTranslator(0)
    [opening] = translator.feed({"type": "message_start", "message": {"id": "m", "usage": ANTHROPIC_USAGE}})
    translator.feed({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 9}})
    [closing] = translator.feed({"type": "message_stop"})
    assert opening["service_tier"] == closing["service_tier"] == "priority"
    assert translator.usage == Usage(45, 9, 5, 10, 20, "priority")  # message_start's split, message_delta's output


def test_a_translated_messages_answer_reports_the_writes_by_lifetime():
    usage = messages_wire.anthropic_usage(Usage(50, 4, 5, 10, 20, "flex"))
    assert usage == {"input_tokens": 15, "cache_creation_input_tokens": 30, "cache_read_input_tokens": 5,
                     "cache_creation": {"ephemeral_5m_input_tokens": 10, "ephemeral_1h_input_tokens": 20},
                     "output_tokens": 4, "service_tier": "flex"}
    assert anthropic.usage_of(usage) == Usage(50, 4, 5, 10, 20, "flex")  # read back as it was


# -- OpenAI: chat, text completions, Responses (Azure, Groq, OpenRouter read the same) ---------------

def test_openai_usage_takes_the_answers_top_level_tier():
    usage = {"prompt_tokens": 10, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": 4}}
    assert openai.usage_of(usage, "flex") == Usage(10, 2, 4, service_tier="flex")
    assert openai.usage_of(usage, "default") == openai.usage_of(usage) == Usage(10, 2, 4)
    assert openai.usage_of(usage, "Priority").service_tier == "priority"
    responses = {"input_tokens": 10, "output_tokens": 2, "input_tokens_details": {"cached_tokens": 4}}
    body = {"id": "r", "output": [], "usage": responses, "service_tier": "scale"}
    assert response_reply(body).usage == Usage(10, 2, 4, service_tier="scale")
    for tier in HOSTILE_TIERS:
        with invalid("openai sent an invalid usage report: service tier is"):
            response_reply({**body, "service_tier": tier})


def test_openai_streams_are_billed_at_the_last_tier_a_chunk_named():
    stream = openai.OpenAIChatStream(None)  # type: ignore[arg-type]  # only `item` is read here
    usage = {"prompt_tokens": 3, "completion_tokens": 1}
    chunks = [{"choices": [{"delta": {"content": "a"}}], "service_tier": "priority"},
              {"choices": [{"delta": {"content": "b"}}], "service_tier": "default"},
              {"choices": [{"delta": {"content": "c"}}]},
              {"choices": [], "usage": usage}]
    read = [stream.item(sse.SseEvent((b"", orjson.dumps(chunk))), chunk) for chunk in chunks]
    assert read[-1].usage == Usage(3, 1)  # "default" came last: the standard tier
    flex = {"choices": [], "usage": usage, "service_tier": "FLEX"}
    assert stream.item(sse.SseEvent((b"", orjson.dumps(flex))), flex).usage == Usage(3, 1, service_tier="flex")
    weird = {"choices": [{"delta": {}}], "service_tier": "weird tier!"}
    stream.item(sse.SseEvent((b"", orjson.dumps(weird))), weird)
    with invalid("service tier is"):
        stream.item(sse.SseEvent((b"", orjson.dumps(chunks[-1]))), chunks[-1])


# -- Bedrock Converse and ConverseStream -------------------------------------------------------------

BEDROCK_USAGE = {"inputTokens": 10, "outputTokens": 3, "totalTokens": 49, "cacheReadInputTokens": 6,
                 "cacheWriteInputTokens": 30,
                 "cacheDetails": [{"ttl": "1h", "inputTokens": 20}, {"ttl": "5m", "inputTokens": 10}]}


def test_bedrock_usage_splits_the_writes_by_ttl_and_reads_the_served_tier():
    assert bedrock.usage_of(BEDROCK_USAGE, {"type": "priority"}) == Usage(46, 3, 6, 10, 20, "priority")
    assert bedrock.usage_of(BEDROCK_USAGE, {"type": "default"}).service_tier == ""
    assert bedrock.usage_of(BEDROCK_USAGE).service_tier == ""  # no serviceTier: the default tier
    only_writes = {k: v for k, v in BEDROCK_USAGE.items() if k != "cacheDetails"}
    assert bedrock.usage_of(only_writes) == Usage(46, 3, 6, 30, 0)  # no detail: five-minute writes
    assert bedrock.usage_of({**BEDROCK_USAGE, "cacheDetails": []}).cache_write_1h_tokens == 0


@pytest.mark.parametrize(("details", "problem"), [
    ("1h", "cacheDetails is not an array"), ([{"ttl": "1h", "inputTokens": 31}], "31 one-hour cache writes exceed"),
    ([{"ttl": "24h", "inputTokens": 1}], "lifetime '24h'"), ([{"ttl": None, "inputTokens": 1}], "lifetime None"),
    ([{"ttl": ["1h"], "inputTokens": 1}], "lifetime ['1h']"), ([7], "a cacheDetails entry is 7"),
    *[([{"ttl": "1h", "inputTokens": count}], "inputTokens is") for count in HOSTILE_COUNTS]])
def test_bedrock_hostile_cache_details_are_invalid(details, problem):
    with invalid(problem):
        bedrock.usage_of({**BEDROCK_USAGE, "cacheDetails": details})


@pytest.mark.parametrize("tier", [*[{"type": t} for t in HOSTILE_TIERS], "priority", ["priority"]])
def test_bedrock_hostile_service_tiers_are_invalid(tier):
    with invalid("bedrock sent an invalid usage report"):
        bedrock.usage_of(BEDROCK_USAGE, tier)


def test_bedrock_answers_and_streams_report_the_served_tier():
    answer = {"output": {"message": {"content": [{"text": "hi"}]}}, "stopReason": "end_turn",
              "usage": BEDROCK_USAGE, "serviceTier": {"type": "flex"}}
    body, usage = bedrock.completion(answer, "chatcmpl-1", "m", 0)
    assert usage == Usage(46, 3, 6, 10, 20, "flex") and body["service_tier"] == "flex"
    chunks = ConverseChunks("chatcmpl-1", "m", 0, as_json=False)
    chunk = chunks.feed("metadata", {"usage": BEDROCK_USAGE, "serviceTier": {"type": "PRIORITY"}})
    assert chunks.usage == Usage(46, 3, 6, 10, 20, "priority") and chunk is not None
    assert chunk["service_tier"] == "priority"


@pytest.mark.parametrize(("asked", "sent"), [
    (None, None), ("auto", None), ("default", None), ("flex", {"type": "flex"}), ("priority", {"type": "priority"}),
    ("reserved", {"type": "reserved"})])
def test_the_clients_tier_becomes_converses_service_tier(asked, sent):
    body = {"messages": [{"role": "user", "content": "hi"}], **({} if asked is None else {"service_tier": asked})}
    assert converse.converse_body(body).get("serviceTier") == sent


@pytest.mark.parametrize("asked", ["scale", "PRIORITY", "fast", 3])
def test_a_tier_bedrock_does_not_offer_is_refused_before_any_call(asked):
    with pytest.raises(ApiError) as caught:
        converse.converse_body({"messages": [{"role": "user", "content": "hi"}], "service_tier": asked})
    assert caught.value.status == 400 and caught.value.param == "service_tier"


def test_a_responses_request_carries_its_tier_into_the_chat_translation():
    assert responses_chat_body({"model": "m", "input": "hi", "service_tier": "flex"})["service_tier"] == "flex"
