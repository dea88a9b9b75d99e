"""The OpenAI adapter: OpenAI's own wire format, so requests pass through nearly untouched."""

import asyncio
import struct
import time
from collections.abc import AsyncIterator

import aiohttp
import yarl

from gateway.providers.openai import float32
from gateway.edge import sse, upstream_headers
from gateway.providers.usage import Usage, checked_usage, reported_seconds, served_tier, token_count, usage_report
from gateway.config import ProviderConfig
from gateway.edge.errors import UpstreamError
from gateway.jsonio import encode, loads
from gateway.providers import shapes
from gateway.providers.base import Allowance, ChatCall, ChatReply, Chunk, EmbeddingCall, EmbeddingReply, \
    FilePart, FormField, SpeechCall, TranscriptionCall, TranscriptionReply, answers, limit
from gateway.providers.http import Upstream, post, read_json, timeout_for
from gateway.providers.openai.multipart import encode_form, new_boundary
from gateway.providers.stream import UpstreamEventStream

PROVIDER = "openai"

BETA_HEADER, REALTIME_BETA = "OpenAI-Beta", "realtime=v1"  # asks for the beta realtime protocol


def usage_of(usage: object, tier: object = None) -> Usage:
    """OpenAI's chat usage, with the answer's `service_tier` (the tier it served), checked
    (gateway.providers.usage; UpstreamError 502 when it is not sound)."""
    return _counted_usage(usage, ("prompt_tokens", "completion_tokens", "prompt_tokens_details"), tier)


def input_output_usage(usage: object) -> Usage:
    """The usage of transcriptions and realtime responses (input_tokens, output_tokens), checked."""
    return _counted_usage(usage, ("input_tokens", "output_tokens", "input_token_details"))


def responses_usage(usage: object, tier: object = None) -> Usage:
    """The usage of a Responses API answer (input_tokens, output_tokens, input_tokens_details)
    with the response's `service_tier`, checked."""
    return _counted_usage(usage, ("input_tokens", "output_tokens", "input_tokens_details"), tier)


def _counted_usage(usage: object, fields: tuple[str, str, str], tier: object = None) -> Usage:
    """A usage object whose `fields` name its prompt and completion counts and the details
    object holding `cached_tokens`, with the served `tier` the answer reports, as a checked Usage."""
    prompt, completion, details_field = fields
    report = usage_report(PROVIDER, usage)
    details = usage_report(PROVIDER, report.get(details_field))
    return checked_usage(PROVIDER, Usage(token_count(PROVIDER, report, prompt),
                                         token_count(PROVIDER, report, completion),
                                         token_count(PROVIDER, details, "cached_tokens"),
                                         service_tier=served_tier(PROVIDER, tier)))


def request_body(call: ChatCall, stream: bool) -> dict:
    """What a chat or text completion call sends: the client's body, addressed to the upstream
    model. A stream always asks for usage, so it is billed even when the client did not ask."""
    body = {**call.body, "model": call.upstream_model, "stream": stream}
    if stream:
        body["stream_options"] = {**(call.body.get("stream_options") or {}), "include_usage": True}
    else:
        body.pop("stream_options", None)
    return body


def chat_reply(provider: str, body: dict) -> ChatReply:
    """A chat completion as it is billed: its shape checked, its usage read (UpstreamError 502 otherwise)."""
    completion = shapes.conforming(provider, body, shapes.OpenAICompletion, "chat completion")
    return ChatReply(body, usage_of(completion.usage, body.get("service_tier")))


def text_reply(provider: str, body: dict) -> ChatReply:
    """A legacy text completion as it is billed, checked as `chat_reply` checks a chat one."""
    completion = shapes.conforming(provider, body, shapes.OpenAITextCompletion, "text completion")
    return ChatReply(body, usage_of(completion.usage, body.get("service_tier")))


def embedding_request(call: EmbeddingCall) -> dict:
    """What an embeddings call sends: the client's body for the upstream model, asking for
    floats (the gateway encodes vectors in the form the client asked for itself)."""
    return {**call.body, "model": call.upstream_model, "encoding_format": "float"}


def chat_allowance(body: dict) -> Allowance:
    """What a chat body lets the provider write: max_tokens or max_completion_tokens (which one it
    honours when both are sent is its own choice) in each of the `n` choices."""
    return Allowance(limit(body.get("max_tokens"), body.get("max_completion_tokens")), answers(body, "n"))


def completion_allowance(body: dict) -> Allowance:
    """What a text completions body lets the provider write: max_tokens in each of `best_of`
    candidates (all generated and billed, `n` of them returned), for each of its prompts."""
    candidates = max(answers(body, "n"), answers(body, "best_of"))
    return Allowance(limit(body.get("max_tokens")), candidates * len(inputs(body.get("prompt"))))


def inputs(value: object) -> list:
    """What OpenAI takes apart in an embeddings `input` or a completions `prompt`: one text, each
    of a list of texts, one token array (a list of ints), or each of a list of token arrays."""
    if isinstance(value, list) and value and not all(isinstance(item, int) for item in value):
        return list(value)
    return [value]


def delta_tokens(chunk: dict) -> int:
    """Completion tokens a chunk delivered: one per choice with content or a tool-call delta."""
    return sum(1 for choice in chunk.get("choices") or ()
               if (delta := choice.get("delta") or {}).get("content") or delta.get("tool_calls"))


class OpenAIChatStream(UpstreamEventStream[Chunk]):
    """OpenAI's chat chunks, relayed as they are, until [DONE]."""

    provider = PROVIDER
    shape: type[shapes.OpenAIChunk] | type[shapes.OpenAITextChunk] = shapes.OpenAIChunk
    what = "stream chunk"
    # Whether a chunk of no choices and no usage is dropped (Azure opens with one whose id is "",
    # which OpenAI's clients cannot take); OpenAI's own chunks are relayed as they are.
    drops_empty = False

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        super().__init__(response)
        self.tier: object = None  # the last `service_tier` a chunk named: the tier the usage is billed at

    async def __aiter__(self) -> AsyncIterator[Chunk]:
        async for chunk in self.items():
            if not (self.drops_empty and chunk.usage is None and not chunk.parsed.get("choices")):
                yield chunk
        if not self.ended:  # without [DONE] it was broken off, however cleanly the connection closed
            raise UpstreamError(502, f"{self.provider} ended the stream before [DONE]")

    @staticmethod
    def _tokens(parsed: dict) -> int:
        return delta_tokens(parsed)

    def parse(self, data: bytes) -> dict | None:
        if data == b"[DONE]":
            return None
        try:
            parsed = loads(data)
        except ValueError:
            raise UpstreamError(502, "openai sent a chunk that is not JSON") from None
        shapes.conforming("openai", parsed, self.shape, self.what)  # an object, its fields typed
        return parsed

    def failure(self, parsed: dict) -> UpstreamError | None:
        if (error := parsed.get("error")) is None:
            return None
        return UpstreamError(502, f"openai stream failed: {error.get('message') or 'no message'}")

    def item(self, event: sse.SseEvent, parsed: dict) -> Chunk:
        if parsed.get("service_tier") is not None:  # each chunk names it; a later one may differ
            self.tier = parsed["service_tier"]
        if parsed.get("usage") and not parsed.get("choices"):
            return Chunk(event.data, parsed, usage=usage_of(parsed["usage"], self.tier))
        return Chunk(event.data, parsed, tokens=self._tokens(parsed))


class OpenAITextStream(OpenAIChatStream):
    """A legacy text completion's stream: chat's reading (SSE, [DONE], errors), chunks whose
    choices carry `text` where chat's carry a delta."""

    shape = shapes.OpenAITextChunk
    what = "completion chunk"

    @staticmethod
    def _tokens(parsed: dict) -> int:
        return sum(1 for choice in parsed.get("choices") or () if choice.get("text"))


class OpenAIAudioStream:
    """Speech audio relayed as the provider sends it."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response
        self.content_type = upstream_headers.content_type(response.headers.get("Content-Type"))  # sent on

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._response.content.iter_any():
                yield chunk
        except TimeoutError:
            raise UpstreamError(504, "openai stopped sending audio (read timeout)") from None
        except aiohttp.ClientError as exc:
            raise UpstreamError(502, f"openai audio stream broke off: {type(exc).__name__}") from None

    async def aclose(self) -> None:
        self._response.close()


def embedding_reply(body: dict) -> EmbeddingReply:
    """The vectors in input order as float32 values, whether upstream sent floats or base64."""
    try:
        items = sorted(body["data"], key=lambda item: item["index"])
        vectors = [float32.decode(v) if isinstance(v := item["embedding"], str) else float32.rounded(v)
                   for item in items]
    except (KeyError, TypeError, ValueError, OverflowError, struct.error) as exc:
        raise UpstreamError(502, f"openai sent a malformed embeddings answer: {type(exc).__name__}") from None
    prompt_tokens = token_count(PROVIDER, usage_report(PROVIDER, body.get("usage")), "prompt_tokens")
    return EmbeddingReply(vectors, prompt_tokens)


def transcription_reply(body: dict) -> TranscriptionReply:
    """The transcript with what it is billed on: tokens, or seconds of audio (usage, else
    `duration`), each checked (gateway.providers.usage). A reply reporting neither costs nothing."""
    shapes.conforming("openai", body, shapes.OpenAITranscription, "transcription")
    usage = usage_report("openai", body.get("usage"))
    if usage.get("type") == "tokens":
        return TranscriptionReply(body, usage=input_output_usage(usage))
    if usage.get("type") == "duration":
        return TranscriptionReply(body, seconds=reported_seconds("openai", "usage.seconds", usage.get("seconds")))
    return TranscriptionReply(body, seconds=reported_seconds("openai", "duration", body.get("duration")))


async def _with_model(form: AsyncIterator[FormField | FilePart],
                      model: str) -> AsyncIterator[FormField | FilePart]:
    async for part in form:
        yield FormField("model", model) if isinstance(part, FormField) and part.name == "model" else part


class OpenAIProvider:
    """OpenAI's wire at `base_url`. Where each operation goes (`url`) and how it is authorized
    (`headers`, `request_headers`) are the hooks a host of the same wire elsewhere overrides
    (gateway.providers.azure); its streams are read by `chat_stream` and `text_stream`."""

    chat_stream: type[OpenAIChatStream] = OpenAIChatStream
    text_stream: type[OpenAITextStream] = OpenAITextStream

    @staticmethod
    def requires_max_tokens(upstream_model: str) -> bool:
        return False

    def __init__(self, provider_id: str, config: ProviderConfig, upstream: Upstream) -> None:
        self.id = provider_id  # the configuration's name for it: `[providers.<id>]`
        self._base = config.base_url.rstrip("/")
        self._api_key = config.api_key
        self._upstream = upstream.for_provider(config)
        self._timeout = timeout_for(config)

    def headers(self, api_key: str = "", content_type: str | None = "application/json") -> dict[str, str]:
        """Request headers with the org's own key when it has one (BYOK), else the gateway's."""
        headers = {"Content-Type": content_type} if content_type else {}
        if key := api_key or self._api_key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def url(self, path: str, upstream_model: str) -> str:
        """Where the operation at `path` (`/chat/completions`, `/embeddings`, ...) for
        `upstream_model` is sent: under the base URL."""
        return self._base + path

    async def request_headers(self, api_key: str = "", content_type: str = "application/json") -> dict[str, str]:
        """The headers of one HTTP request (`headers`; a host whose credentials are fetched first
        overrides this)."""
        return self.headers(api_key, content_type)

    async def send(self, path: str, upstream_model: str, data: bytes | AsyncIterator[bytes], api_key: str = "",
                   content_type: str = "application/json") -> aiohttp.ClientResponse:
        """POST `data` to the operation at `path` for `upstream_model`, with the org's key if it has
        one; the open 200 response, or UpstreamError."""
        return await post(self._upstream, self.id, self.url(path, upstream_model), data,
                          await self.request_headers(api_key, content_type), self._timeout)

    async def send_json(self, path: str, body: dict, api_key: str = "") -> aiohttp.ClientResponse:
        """POST `body` (addressed to its `model`) to the operation at `path`, as `send`."""
        return await self.send(path, str(body.get("model") or ""), encode(body), api_key)

    # The client's bodies go up as they are: what they allow is read off them.
    chat_request = completion_request = staticmethod(request_body)
    chat_allowance = staticmethod(chat_allowance)
    completion_allowance = staticmethod(completion_allowance)

    async def chat(self, call: ChatCall) -> ChatReply:
        response = await self.send_json("/chat/completions", request_body(call, False), call.api_key)
        return chat_reply(self.id, await read_json(self.id, response))

    async def open_chat_stream(self, call: ChatCall) -> OpenAIChatStream:
        response = await self.send_json("/chat/completions", request_body(call, True), call.api_key)
        return self.chat_stream(response)

    async def complete(self, call: ChatCall) -> ChatReply:
        """A legacy text completion (`call.body` an OpenAI completions request), whole."""
        response = await self.send_json("/completions", request_body(call, False), call.api_key)
        return text_reply(self.id, await read_json(self.id, response))

    async def open_completion_stream(self, call: ChatCall) -> OpenAITextStream:
        response = await self.send_json("/completions", request_body(call, True), call.api_key)
        return self.text_stream(response)

    async def embed(self, call: EmbeddingCall) -> EmbeddingReply:
        response = await self.send_json("/embeddings", embedding_request(call), call.api_key)
        return embedding_reply(await read_json(self.id, response))

    async def open_speech(self, call: SpeechCall) -> OpenAIAudioStream:
        body = {**call.body, "model": call.upstream_model}
        response = await self.send_json("/audio/speech", body, call.api_key)
        return OpenAIAudioStream(response)

    async def transcribe(self, call: TranscriptionCall) -> TranscriptionReply:
        """Send the form upstream while it is still arriving from the client."""
        boundary = new_boundary()
        body = encode_form(_with_model(call.form, call.upstream_model), boundary)
        response = await self.send("/audio/transcriptions", call.upstream_model, body, call.api_key,
                                   f"multipart/form-data; boundary={boundary}")
        return transcription_reply(await read_json(self.id, response))

    async def open_realtime(self, upstream_model: str, api_key: str = "", max_message_bytes: int = 4 * 1024 * 1024,
                            *, beta: bool = False) -> aiohttp.ClientWebSocketResponse:
        """The provider's realtime WebSocket for `upstream_model`, in the GA protocol or, with
        `beta`, the beta one; UpstreamError if it will not open."""
        url = yarl.URL(f"{self._base}/realtime").with_query({**self._upstream.query, "model": upstream_model})
        url = url.with_scheme("wss" if url.scheme in ("https", "wss") else "ws")
        headers = self._upstream.with_extras(self.headers(api_key, content_type=None)
                                             | ({BETA_HEADER: REALTIME_BETA} if beta else {}))
        # Once open, a session may idle as long as the client likes: no receive timeout.
        idle = aiohttp.ClientWSTimeout(ws_receive=None, ws_close=10)
        wait = self._timeout.sock_read  # ws_connect takes no ClientTimeout: bound the handshake here
        started = time.monotonic()
        try:
            async with asyncio.timeout(wait):
                socket = await self._upstream.session.ws_connect(url, headers=headers, timeout=idle,
                                                                 max_msg_size=max_message_bytes)
        except aiohttp.WSServerHandshakeError as exc:
            self._upstream.observe(self.id, exc.status, time.monotonic() - started)
            retry_after = exc.headers.get("Retry-After") if exc.headers else None
            raise UpstreamError(exc.status, f"openai refused the realtime connection: status {exc.status}",
                                retry_after=retry_after) from None
        except TimeoutError:
            raise UpstreamError(504, f"openai did not open the realtime connection in {wait:g} s") from None
        except aiohttp.ClientError as exc:
            raise UpstreamError(502, f"openai realtime connection failed: {type(exc).__name__}") from None
        self._upstream.observe(self.id, 101, time.monotonic() - started)
        return socket
