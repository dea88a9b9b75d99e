"""What adapters can do, one Protocol per capability, and the registry that says which adapter
has which: an adapter serves a capability exactly when `build` lists it there, so code handed
an adapter from the registry has it typed by what it can do, never cast."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Protocol

import aiohttp
import msgspec

from gateway.providers.base import (
    Allowance, AudioStream, BatchLine, BatchResult, ChatCall, ChatReply, ChatStream, EmbeddingCall, EmbeddingReply,
    MessageEvent, MusicCall, MusicReply, ResponseEvent, SpeechCall, TranscriptionCall, TranscriptionReply,
    UpstreamBatch,
)


class ChatProvider(Protocol):
    id: str

    def requires_max_tokens(self, upstream_model: str) -> bool:
        """Whether chat requests for `upstream_model` without max_tokens are refused (spec 7:
        Anthropic's models, wherever they are served)."""

    def chat_request(self, call: ChatCall, stream: bool) -> dict:
        """The request this adapter sends upstream for `call` (an OpenAI chat body, translated)."""

    def chat_allowance(self, body: dict) -> Allowance:
        """What an OpenAI chat `body`, as this adapter sends it, lets the provider write."""

    async def chat(self, call: ChatCall) -> ChatReply:
        """One non-streamed completion; raises UpstreamError on any provider failure."""

    async def open_chat_stream(self, call: ChatCall) -> ChatStream:
        """Start a streamed completion; raises UpstreamError before any chunk if refused."""


class MessageEvents(Protocol):
    """Anthropic stream events, native or translated from a chat stream."""

    def __aiter__(self) -> AsyncIterator[MessageEvent]:
        """Events as they arrive; raises UpstreamError if the provider fails mid-way."""

    async def aclose(self) -> None:
        """Stop reading and abandon the upstream request."""


class MessagesProvider(Protocol):
    """Speaks Anthropic's Messages API natively: /v1/messages bodies pass through as they are."""

    def messages_request(self, call: ChatCall, stream: bool) -> dict:
        """The request sent upstream for `call`: its Messages body as it is."""

    def messages_allowance(self, body: dict) -> Allowance:
        """What a Messages `body` (sent as it is) lets the provider write."""

    async def messages(self, call: ChatCall) -> ChatReply:
        """One non-streamed message, Anthropic-shaped; raises UpstreamError."""

    async def open_messages_stream(self, call: ChatCall) -> MessageEvents:
        """Start a streamed message; raises UpstreamError before any event if refused."""


class CompletionProvider(Protocol):
    """Legacy text completions (POST /v1/completions): OpenAI-shaped bodies, text choices."""

    def completion_request(self, call: ChatCall, stream: bool) -> dict:
        """The request sent upstream for `call`: its completions body as it is."""

    def completion_allowance(self, body: dict) -> Allowance:
        """What a completions `body` (sent as it is) lets the provider write."""

    async def complete(self, call: ChatCall) -> ChatReply:
        """One non-streamed text completion; raises UpstreamError on any provider failure."""

    async def open_completion_stream(self, call: ChatCall) -> ChatStream:
        """Start a streamed text completion; raises UpstreamError before any chunk if refused."""


class TokenCounter(Protocol):
    """Counts a Messages request's input tokens natively (free of charge at the provider)."""

    async def count_tokens(self, call: ChatCall) -> int:
        """The input tokens of the Anthropic-shaped `call.body`; raises UpstreamError."""


class ResponseEvents(Protocol):
    def __aiter__(self) -> AsyncIterator[ResponseEvent]:
        """Events as they arrive, the closing one last with its usage; raises UpstreamError."""

    async def aclose(self) -> None:
        """Stop reading and abandon the upstream request."""


class ResponsesProvider(Protocol):
    """Speaks OpenAI's Responses API natively: /v1/responses bodies pass through."""

    def response_request(self, call: ChatCall, stream: bool) -> dict:
        """The request sent upstream for `call`: its Responses body as it is."""

    def response_allowance(self, body: dict) -> Allowance:
        """What a Responses `body` (sent as it is) lets the provider write."""

    async def respond(self, call: ChatCall) -> ChatReply:
        """One response object; raises UpstreamError."""

    async def open_response_stream(self, call: ChatCall) -> ResponseEvents:
        """Start a streamed response; raises UpstreamError before any event if refused."""


class EmbeddingProvider(Protocol):
    async def embed(self, call: EmbeddingCall) -> EmbeddingReply:
        """One embeddings request; raises UpstreamError on any provider failure."""


class SpeechProvider(Protocol):
    async def open_speech(self, call: SpeechCall) -> AudioStream:
        """Start synthesising; raises UpstreamError if refused before any audio."""


class TranscriptionProvider(Protocol):
    async def transcribe(self, call: TranscriptionCall) -> TranscriptionReply:
        """Upload the form as it is read and return the transcript; raises UpstreamError."""


class RealtimeProvider(Protocol):
    async def open_realtime(self, upstream_model: str, api_key: str = "", max_message_bytes: int = ...,
                            *, beta: bool = False) -> aiohttp.ClientWebSocketResponse:
        """The provider's realtime WebSocket, GA or (`beta`) beta; raises UpstreamError if it will not open."""


class MusicProvider(Protocol):
    async def generate_music(self, call: MusicCall, timeout_s: float) -> MusicReply:
        """Exactly one upstream call, no retries. Raises SafetyBlocked or UpstreamError."""


class BatchProvider(Protocol):
    """A provider's own batch API (the openai protocol's Files + Batches, gateway.providers.openai.
    batches; the anthropic protocol's Message Batches, gateway.providers.anthropic.batches): lines
    sent in one upstream batch, polled, their results read back. Every call raises UpstreamError
    when the provider fails; none holds a whole batch in memory (lines are sent as they are read,
    results yielded as they arrive). `api_key` is an org's own key (BYOK); empty: the gateway's."""

    def batchable(self, route: str) -> bool:
        """Whether lines shaped for gateway `route` (/v1/chat/completions, /v1/embeddings,
        /v1/responses, /v1/completions, /v1/messages) can go to this provider's batch API."""

    async def submit(self, lines: AsyncIterator[BatchLine], *, route: str, batch_id: str, api_key: str = "") -> str:
        """Create one upstream batch of `lines` (each translated as the single route would send
        it, never streamed), marked with the gateway's `batch_id` where the provider keeps marks;
        its upstream id. `route` must be batchable (ValueError otherwise). What `lines` raises
        (a line the route's translation refuses: its ApiError 400) is raised as it is, the
        upload abandoned. Custom ids must be unique in the batch; Anthropic's also match
        ^[a-zA-Z0-9_-]{1,64}$, or the whole batch is refused (400). The OpenAI protocol checks
        its lines after creating the batch: one it refuses fails the batch, with no results."""

    async def find(self, batch_id: str, *, since_us: int, lines: int, taken: frozenset[str],
                   api_key: str = "") -> str | None:
        """The upstream batch `submit` created for `batch_id` at or after `since_us` (UTC
        microseconds; a few seconds earlier are allowed, for the provider's clock) with `lines`
        lines and not among `taken`, or None: after a crash, so a batch is found again rather
        than created twice. Where the provider keeps marks (OpenAI's metadata) the mark decides;
        where it keeps none (Anthropic) the earliest batch of that size since then."""

    async def poll(self, upstream_id: str, api_key: str = "") -> UpstreamBatch:
        """How the upstream batch stands."""

    def results(self, upstream_id: str, *, route: str, api_key: str = "") -> AsyncIterator[BatchResult]:
        """Every line's result of an ended batch, read as it arrives, translated to `route`'s shape
        with its usage read as the single route reads it. A line that never ran is `canceled` or
        `expired` (status 0) where the provider says so, else absent (an OpenAI batch that failed
        validation has none). A line whose answer is malformed is `errored` with status 502; a
        line that names no custom_id, or a broken results file, raises UpstreamError 502."""

    async def cancel(self, upstream_id: str, api_key: str = "") -> None:
        """Ask the provider to stop the batch (it ends later, its finished lines kept)."""


class Offer(msgspec.Struct, frozen=True, kw_only=True):
    """What one configured provider serves: its adapter under each capability its protocol has
    (None: not that one). Each provider folder's `offer` says it; `Providers` gathers them."""

    chat: ChatProvider | None = None
    messages: MessagesProvider | None = None
    responses: ResponsesProvider | None = None
    completion: CompletionProvider | None = None
    token_counting: TokenCounter | None = None
    embedding: EmbeddingProvider | None = None
    speech: SpeechProvider | None = None
    transcription: TranscriptionProvider | None = None
    realtime: RealtimeProvider | None = None
    music: MusicProvider | None = None
    batch: BatchProvider | None = None  # only where the provider's batch_api is on (gateway.config.batch_api)


class Providers(msgspec.Struct, frozen=True, kw_only=True):
    """Every adapter of this gateway by provider id, once under each capability it has. The
    field names are the catalogue's model kinds (and `messages`, the native Messages API,
    `responses`, the native Responses API, and `token_counting`, Anthropic's count_tokens)."""

    chat: Mapping[str, ChatProvider]
    messages: Mapping[str, MessagesProvider]
    responses: Mapping[str, ResponsesProvider]
    completion: Mapping[str, CompletionProvider]
    token_counting: Mapping[str, TokenCounter]
    embedding: Mapping[str, EmbeddingProvider]
    speech: Mapping[str, SpeechProvider]
    transcription: Mapping[str, TranscriptionProvider]
    realtime: Mapping[str, RealtimeProvider]
    music: Mapping[str, MusicProvider]
    batch: Mapping[str, BatchProvider]

    @classmethod
    def gathered(cls, offers: Mapping[str, Offer]) -> Providers:
        """Every provider's offer by provider id, filed under each capability it serves."""
        return cls(**{field: {provider_id: adapter for provider_id, offer in offers.items()
                              if (adapter := getattr(offer, field)) is not None}
                      for field in cls.__struct_fields__})

    @property
    def ids(self) -> frozenset[str]:
        """Every provider some adapter serves."""
        return frozenset().union(*(getattr(self, field) for field in self.__struct_fields__))
