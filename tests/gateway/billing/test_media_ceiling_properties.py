"""Property: with images (by URL, inline of any size, any detail), audio (WAV, MP3), documents
(PDFs inline or by URL, plain text) among its text, no request on any chat route and provider
can be billed more than its ceiling: its text at a token a byte, plus what the provider's rule
bills for each media part AS IT IS SENT (after the route's and the adapter's translations, built
by the gateway's own code), within the model's context, and the output the request allows.

What a provider bills for media is the simulator's reading of each provider's published rule
(`simulator.media_billing`: OpenAI's tiles by model, gpt-4o-mini multiplied, the largest image
for a URL; Anthropic's pixels / 750; Gemini's 258-token tiles, 32 tokens a second of audio, 258 a
PDF page), applied to the body the adapter sends, apart from the gateway's bounds. A part an
adapter refuses (a URL for Gemini or a translated Anthropic body) is a 400: nothing is sent.
"""

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from tests.gateway.billing.ceiling_support import CATALOGUE, anthropic_messages, sent_or_refused
from tests.gateway.billing.media_support import (
    anthropic_blocks, b64, chat_parts, data_url, png, responses_parts, wav,
)
from tests.gateway.billing.test_ceiling_properties import (
    CHAT_MODELS, SERVICES, SHARES, chat_reader, valid, worst_case_holds,
)

from gateway.billing import ceilings
from gateway.catalogue import Resolved
from gateway.chat import service as chat
from gateway.chat.request import ChatRequest
from gateway.edge.errors import ApiError
from gateway.jsonio import encode
from gateway.messages import service as messages
from gateway.messages.request import MessagesRequest
from gateway.providers.anthropic.adapter import AnthropicProvider
from gateway.providers.base import ChatCall
from gateway.providers.google.adapter import GoogleProvider
from gateway.providers.vertex.adapter import VertexProvider, is_claude
from gateway.providers.bedrock.adapter import BedrockProvider
from gateway.resolution import CHAT, servers
from gateway.responses.request import ResponsesRequest, check
from gateway.responses.service import Conversation
from gateway.responses import translate
from simulator.media_billing import anthropic_media_tokens, gemini_inline, openai_media_tokens

MEDIA_RUNS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                             HealthCheck.data_too_large])
MEDIA_TYPES = frozenset({"image_url", "input_audio", "file", "input_image", "input_file", "image"})
LIMITS = st.fixed_dictionaries({}, optional={"max_tokens": st.sampled_from([1, 64, 4096]),
                                             "max_completion_tokens": st.sampled_from([1, 64])})


def is_media(part: object) -> bool:
    """A media part: every image, audio and file part, and documents but those of plain text."""
    if not isinstance(part, dict):
        return False
    if part.get("type") == "document":
        return (part.get("source") or {}).get("type") not in ("text", "content")
    return part.get("type") in MEDIA_TYPES


def text_of(payload: object) -> object:
    """`payload` with every media part taken out of the content it is in: its text and shape."""
    if isinstance(payload, list):
        return [text_of(item) for item in payload if not is_media(item)]
    if isinstance(payload, dict):
        return {name: text_of(value) for name, value in payload.items()}
    return payload


def billed_media(adapter: object, upstream_model: str, wire: dict) -> int:
    """What the provider of `adapter` bills for the media of the body it is sent."""
    if isinstance(adapter, AnthropicProvider) or (isinstance(adapter, VertexProvider) and is_claude(upstream_model)):
        return anthropic_media_tokens(wire.get("messages") or [])
    if isinstance(adapter, BedrockProvider):  # Converse's image bytes, billed as Claude's
        return anthropic_media_tokens(converse_as_anthropic(wire.get("messages") or []))
    if isinstance(adapter, GoogleProvider | VertexProvider):
        return sum(gemini_inline(part["inlineData"]["mimeType"], part["inlineData"]["data"])
                   for content in wire.get("contents") or () for part in content["parts"] if "inlineData" in part)
    conversation = wire["input"] if isinstance(wire.get("input"), list) else wire.get("messages") or []
    return openai_media_tokens(upstream_model, conversation)


def converse_as_anthropic(messages: list) -> list:
    """Converse messages with their images as Anthropic's image blocks, for Anthropic's rule."""
    return [{"content": [{"type": "image", "source": {"type": "base64", "data": block["image"]["source"]["bytes"]}}
                         for block in message["content"] if "image" in block]} for message in messages]


def billable_prompt(model: Resolved, client_body: object, media: int) -> int:
    """The most prompt a provider reports: the text at a token a byte and the media as billed."""
    return min(len(encode(text_of(client_body))) + media, model.record.context_length)


# -- POST /v1/chat/completions -------------------------------------------------------------------

@CHAT_MODELS
@MEDIA_RUNS
@given(content=st.lists(chat_parts(), min_size=1, max_size=4), limits=LIMITS, shares=SHARES)
@example(content=[{"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}], limits={"max_tokens": 1},
         shares=(1000, 1000, 0, 1000))  # the attack's: a URL of a few bytes, billed as the largest image
def test_chat_with_media(model, content, limits, shares):
    body = {"model": model, "messages": [{"role": "system", "content": "be brief"},
                                         {"role": "user", "content": content}], **limits}
    if (request := valid(body, ChatRequest)) is None:
        return
    try:
        usable = chat.with_token_limit(request)(servers(SERVICES, model, CHAT))
    except ApiError:
        return
    ceiling = chat.ceiling(SERVICES, body)
    for one in usable:
        call = ChatCall("r", one.model.upstream_model, body)
        if (wire := sent_or_refused(lambda one=one, call=call: one.provider.chat_request(call, False))) is None:
            continue
        output = chat_reader(one.provider)(wire, ceilings.output_limit(one.model))
        prompt = billable_prompt(one.model, body, billed_media(one.provider, one.model.upstream_model, wire))
        worst_case_holds(shares, one.model, ceiling(one.model), prompt, output)


# -- POST /v1/messages ---------------------------------------------------------------------------

@CHAT_MODELS
@MEDIA_RUNS
@given(content=st.lists(anthropic_blocks(), min_size=1, max_size=4), max_tokens=st.sampled_from([1, 64, 4096]),
       shares=SHARES)
def test_messages_with_media(model, content, max_tokens, shares):
    body = {"model": model, "max_tokens": max_tokens, "messages": [{"role": "user", "content": content}]}
    if valid(body, MessagesRequest) is None:
        return
    sent = messages.Sent(SERVICES, body)
    ceiling = sent.ceiling()
    for one in servers(SERVICES, model, CHAT):
        native = sent.native(one.model)
        if native is not None:
            wire = native.messages_request(ChatCall("r", one.model.upstream_model, body), False)
            output = anthropic_messages(wire, ceilings.output_limit(one.model))
        else:
            translated = sent_or_refused(lambda one=one: sent.to(one.model))
            wire = translated and sent_or_refused(lambda one=one, translated=translated: one.provider.chat_request(
                ChatCall("r", one.model.upstream_model, translated), False))
            if wire is None:
                continue
            output = chat_reader(one.provider)(wire, ceilings.output_limit(one.model))
        prompt = billable_prompt(one.model, body, billed_media(one.provider, one.model.upstream_model, wire))
        worst_case_holds(shares, one.model, ceiling(one.model), prompt, output)


# -- POST /v1/responses --------------------------------------------------------------------------

@CHAT_MODELS
@MEDIA_RUNS
@given(content=st.lists(responses_parts(), min_size=1, max_size=4), shares=SHARES)
def test_responses_with_media(model, content, shares):
    body = {"model": model, "input": [{"role": "user", "content": content}], "max_output_tokens": 64}
    if (request := valid(body, ResponsesRequest)) is None:
        return
    check(request)
    try:
        items = translate.input_items(body["input"], False)
    except ApiError:
        return
    conversation = Conversation(SERVICES, None, body, [], items)  # type: ignore[arg-type]  # no route needed
    ceiling = conversation.ceiling()
    for one in servers(SERVICES, model, CHAT):
        sent = sent_or_refused(lambda one=one: conversation.sent(one.model))
        native = conversation.native(one.model)
        call = sent and ChatCall("r", one.model.upstream_model, sent)
        if call is None:
            continue
        build = (lambda native=native, call=call: native.response_request(call, False)) if native is not None \
            else (lambda one=one, call=call: one.provider.chat_request(call, False))
        if (wire := sent_or_refused(build)) is None:
            continue
        output = 64 if native is not None else chat_reader(one.provider)(wire, ceilings.output_limit(one.model))
        prompt = billable_prompt(one.model, [body, []], billed_media(one.provider, one.model.upstream_model, wire))
        worst_case_holds(shares, one.model, ceiling(one.model), prompt, output)


# -- the rules' corners, by example ----------------------------------------------------------------

MINI, GPT4O = CATALOGUE.resolve("gpt-4o-mini"), CATALOGUE.resolve("gpt-4o")
HAIKU, FLASH = CATALOGUE.resolve("claude-haiku-4-5"), CATALOGUE.resolve("gemini-2.5-flash")


def bound(model: Resolved, part: dict) -> int:
    """What one part adds to a body's prompt bound on `model`'s provider."""
    empty = {"messages": [{"role": "user", "content": []}]}
    body = {"messages": [{"role": "user", "content": [part]}]}
    protocol = ceilings.protocol(SERVICES, model)
    return ceilings.prompt_bound(model, body, protocol=protocol) - ceilings.prompt_bound(model, empty)


def image(url: str, detail: str | None = None) -> dict:
    return {"type": "image_url", "image_url": {"url": url, **({"detail": detail} if detail else {})}}


@pytest.mark.parametrize(("model", "url", "detail", "tokens"), [
    (GPT4O, "https://example.com/a.png", None, 85 + 8 * 170),  # size unknown: 768 x 2048, 8 tiles
    (GPT4O, data_url("image/png", png(1024, 1024)), None, 765),  # OpenAI's worked examples
    (GPT4O, data_url("image/png", png(2048, 4096)), "high", 1105),
    (GPT4O, data_url("image/png", png(2048, 4096)), "low", 85),
    (MINI, "https://example.com/a.png", "auto", 2833 + 8 * 5667),
    (MINI, data_url("image/png", png(100, 100)), None, 2833 + 5667),
    (HAIKU, "https://example.com/a.png", None, 1640),
    (HAIKU, data_url("image/png", png(200, 300)), None, 80),  # 60,000 px / 750
    (HAIKU, data_url("image/png", png(8000, 8000)), None, 1640),
    (FLASH, data_url("image/png", png(384, 384)), None, 258),
    (FLASH, data_url("image/png", png(1536, 1536)), None, 4 * 258),
])
def test_an_image_counts_what_its_provider_bills_for_it(model, url, detail, tokens):
    assert bound(model, image(url, detail)) == tokens


def test_what_has_no_bound_counts_the_context():
    assert bound(FLASH, image("https://example.com/a.png")) >= FLASH.record.context_length - 64  # not sent, anyway
    pdf_url = {"type": "document", "source": {"type": "url", "url": "https://example.com/a.pdf"}}
    assert ceilings.prompt_bound(HAIKU, {"messages": [{"role": "user", "content": [pdf_url]}]},
                                 protocol="anthropic") == HAIKU.record.context_length
    unknown = {"messages": [{"role": "user", "content": [image("https://example.com/a.png")]}]}
    assert ceilings.prompt_bound(GPT4O, unknown) == GPT4O.record.context_length  # no protocol given


def test_audio_counts_its_longest_duration():
    clip = {"type": "input_audio", "input_audio": {"format": "wav", "data": b64(wav(3.0))}}
    assert bound(GPT4O, clip) == 30 + 1  # 3 s (and its 44-byte header) at 10 tokens a second
    gemini_clip = image(data_url("audio/wav", wav(3.0)))
    gemini_clip["type"] = "file"
    gemini_clip["file"] = {"file_data": gemini_clip.pop("image_url")["url"]}
    assert bound(FLASH, gemini_clip) == 3 * 32 + 1
