"""What passes between the gateway and its upstream adapters: calls, replies and streams
(what each adapter can do: gateway.providers.capabilities).

Adapters speak their provider's wire format and hand back OpenAI-shaped results, so the rest
of the gateway never sees a provider's own format. A provider speaking a protocol the gateway
has is configuration (`[providers.<id>]`) plus catalogue rows; a new protocol is one module.
"""

from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Protocol

import msgspec

from gateway.providers.usage import Usage
from gateway.edge.errors import bad_request


class ChatCall(msgspec.Struct, frozen=True):
    """A chat request on its way upstream: the client's OpenAI-shaped body and the target."""

    request_id: str
    upstream_model: str
    body: dict  # the client's request, OpenAI chat format, unknown fields kept
    api_key: str = ""  # the organization's own provider key (BYOK); empty: the gateway's key


class Allowance(msgspec.Struct, frozen=True):
    """The output a request as sent upstream lets its provider produce: at most `each` tokens
    (None: no limit sent, so the model's own) in each of `answers` answers. What a request may
    cost is bounded by it (gateway.billing.ceilings); each adapter says what its bodies allow."""

    each: int | None = None
    answers: int = 1


def count(value: object) -> int | None:
    """`value` when it is a whole number of at least 0 (never a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def limit(*values: object) -> int | None:
    """The output limit a provider may honour among the limits a body sets (None: not given):
    the largest, since which one wins is the provider's to decide; None when none is given, or
    one is not a count (a lenient provider may read it as anything up to the model's own)."""
    given = [value for value in values if value is not None]
    counts = [number for value in given if (number := count(value)) is not None]
    return max(counts) if given and len(counts) == len(given) else None


def answers(body: dict, name: str) -> int:
    """How many answers `body[name]` asks for (absent or null: one); 400 naming it otherwise,
    before any upstream call (the edge checks it first; this keeps a bound from guessing)."""
    value = body.get(name)
    if value is None:
        return 1
    if (number := count(value)) is None or number < 1:
        raise bad_request(f"{name} must be a whole number of at least 1", name)
    return number


def alternating(turns: list[tuple[str, list[dict]]]) -> list[dict]:
    """(role, content blocks) turns as messages whose roles alternate, consecutive turns of one
    role merged into one message (Anthropic's Messages and Bedrock's Converse require it)."""
    merged: list[dict] = []
    for role, blocks in turns:
        if merged and merged[-1]["role"] == role:
            merged[-1]["content"].extend(blocks)
        else:
            merged.append({"role": role, "content": list(blocks)})
    return merged


def completion_id(request_id: str) -> str:
    """The `chat.completion` id of a request whose provider names none of its own."""
    return f"chatcmpl-{request_id}"


class ChatReply(msgspec.Struct, frozen=True):
    body: dict  # an OpenAI `chat.completion` object
    usage: Usage


class Chunk(msgspec.Struct, frozen=True):
    """One streamed chat chunk, OpenAI-shaped, with what billing needs to know about it."""

    data: bytes  # the encoded OpenAI chunk, relayed as is
    parsed: dict
    usage: Usage | None = None  # set on the final usage report, which carries no choices
    tokens: int = 0  # completion tokens this chunk delivered (one per content or tool delta)


class MessageEvent(msgspec.Struct, frozen=True):
    """One Anthropic stream event on its way to a `/v1/messages` client, as SSE bytes."""

    name: str
    frame: bytes  # `event: NAME` and `data: ...`, ready to write
    data: dict
    usage: Usage | None = None  # on message_delta: the whole message's usage
    tokens: int = 0  # output tokens the event delivered: one per non-empty content delta


class ResponseEvent(msgspec.Struct, frozen=True):
    """One Responses stream event: its decoded body, the tokens it delivered, and (closing) the usage."""

    parsed: dict
    tokens: int = 0
    usage: Usage | None = None


class MusicCall(msgspec.Struct, frozen=True):
    request_id: str
    upstream_model: str
    prompt: str  # composed: prompt, then the instrumental note or the lyrics block
    images: list[tuple[str, bytes]] = []  # (mime type, bytes) reference images
    api_key: str = ""  # the organization's own provider key (BYOK); empty: the gateway's key


class MusicReply(msgspec.Struct, frozen=True):
    audio: bytes
    mime_type: str
    text: str  # lyrics and structure markers


class SafetyBlocked(Exception):
    """The provider's safety filter refused the prompt (answered as 422, never charged)."""


class ChatStream(Protocol):
    def __aiter__(self) -> AsyncIterator[Chunk]:
        """Chunks as the provider produces them; raises UpstreamError if it fails mid-way."""

    async def aclose(self) -> None:
        """Stop reading and abandon the upstream request (cancels generation upstream)."""


class EmbeddingCall(msgspec.Struct, frozen=True):
    request_id: str
    upstream_model: str
    body: dict  # the client's request, OpenAI format; the adapter asks upstream for floats
    api_key: str = ""  # the organization's own provider key (BYOK); empty: the gateway's key


class EmbeddingReply(msgspec.Struct, frozen=True):
    vectors: list[list[float]]  # in input order, decoded whatever form upstream sent
    prompt_tokens: int


class SpeechCall(msgspec.Struct, frozen=True):
    request_id: str
    upstream_model: str
    body: dict  # the client's request, OpenAI format, unknown fields kept
    api_key: str = ""


class AudioStream(Protocol):
    content_type: str  # of the audio, as the provider labelled it

    def __aiter__(self) -> AsyncIterator[bytes]:
        """Audio bytes as they arrive; raises UpstreamError if the provider fails mid-way."""

    async def aclose(self) -> None:
        """Stop reading and abandon the upstream request."""


class FormField(msgspec.Struct, frozen=True):
    name: str
    value: str


class FilePart(msgspec.Struct, frozen=True):
    filename: str
    content_type: str
    chunks: AsyncIterator[bytes]  # the file as it is read from the client, never held whole


class TranscriptionCall(msgspec.Struct, frozen=True):
    request_id: str
    upstream_model: str
    form: AsyncIterator[FormField | FilePart]  # the client's form, in order, as it arrives
    api_key: str = ""


class TranscriptionReply(msgspec.Struct, frozen=True):
    body: dict  # OpenAI's JSON transcription (json or verbose_json)
    seconds: Decimal | None = None  # audio duration, when the provider bills by the minute
    usage: Usage | None = None  # tokens, when the provider bills by tokens


class BatchLine(msgspec.Struct, frozen=True):
    """One line of a batch on its way to a provider's own batch API (gateway.batches)."""

    custom_id: str  # what the provider is to echo back with its result (the gateway's, not the client's)
    upstream_model: str
    body: dict  # in the shape of the batch's gateway route (BatchProvider.batchable), model not yet replaced


class BatchResult(msgspec.Struct, frozen=True, kw_only=True):
    """One line's result, read back from a provider's batch: its answer in the shape of the batch's
    gateway route with the usage it reports (`reply`, read as the single route reads one), or why
    it has none (`status` the provider's HTTP status for an error, 0 when it was never run)."""

    custom_id: str
    reply: ChatReply | None = None
    status: int = 200
    outcome: str = "succeeded"  # "succeeded", "errored", "canceled" or "expired"
    message: str = ""  # the provider's error message, for a line without a reply


class UpstreamBatch(msgspec.Struct, frozen=True):
    """How a provider's batch stands: `ended` once its results can be read (all of them)."""

    id: str
    ended: bool
    status: str  # the provider's own word for it
