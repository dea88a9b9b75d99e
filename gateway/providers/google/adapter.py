"""The Google adapter: the Gemini API `generateContent` format. Serves chat and the music models.

Chat requests are translated by `chat_request`, answers by `chat`
(`generateContent`, and `streamGenerateContent?alt=sse` relayed event by event).

A music answer carries a text part (lyrics and structure) and an `inlineData` part with the
MP3. Gemini reports safety refusals three ways, all mapped to SafetyBlocked: a 200 with
`promptFeedback.blockReason`, a candidate stopped for safety with no audio, or a 400 saying
the prompt was blocked.
"""

import asyncio
import base64
import binascii
import time
from collections.abc import AsyncGenerator

import aiohttp

from gateway.edge import sse
from gateway.config import ProviderConfig
from gateway.edge.errors import UpstreamError
from gateway.jsonio import encode
from gateway.providers.google import chat as wire
from gateway.providers.google import chat_request as request_wire
from gateway.providers.base import Allowance, ChatCall, ChatReply, Chunk, MusicCall, MusicReply, SafetyBlocked
from gateway.providers.http import Upstream, post_json, read_json, timeout_for
from gateway.providers.openai.adapter import delta_tokens
from gateway.providers.stream import ReadAhead, UpstreamEventStream

SAFETY_FINISH = frozenset({"SAFETY", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII", "RECITATION",
                           "IMAGE_SAFETY"})


def music_body(call: MusicCall) -> dict:
    parts: list[dict] = [{"text": call.prompt}]
    parts += [{"inlineData": {"mimeType": mime, "data": base64.b64encode(data).decode()}}
              for mime, data in call.images]
    return {"contents": [{"role": "user", "parts": parts}],
            "generationConfig": {"responseModalities": ["AUDIO", "TEXT"]}}


def music_reply(body: dict) -> MusicReply:
    """The audio and text of a Gemini answer, or why there is none."""
    if reason := (body.get("promptFeedback") or {}).get("blockReason"):
        raise SafetyBlocked(f"the prompt was blocked by the provider's safety filter ({reason})")
    candidate = (body.get("candidates") or [{}])[0]
    parts = (candidate.get("content") or {}).get("parts") or []
    audio = next((p["inlineData"] for p in parts if p.get("inlineData")), None)
    if audio is None and candidate.get("finishReason") in SAFETY_FINISH:
        raise SafetyBlocked(f"the generation was stopped by the provider's safety filter"
                            f" ({candidate['finishReason']})")
    if audio is None:
        raise UpstreamError(502, "google returned no audio for the music generation")
    try:
        data = base64.b64decode(audio.get("data", ""), validate=True)
    except (binascii.Error, ValueError):
        raise UpstreamError(502, "google returned audio that is not valid base64") from None
    text = "".join(p.get("text") or "" for p in parts)
    return MusicReply(data, audio.get("mimeType", "audio/mpeg"), text)


class GeminiChatStream(ReadAhead, UpstreamEventStream[dict]):
    """Gemini's stream events translated into OpenAI chunks as they arrive, the usage last."""

    provider = "google"

    def __init__(self, response: aiohttp.ClientResponse, translator: wire.GeminiChunkTranslator) -> None:
        super().__init__(response)
        self._translator = translator
        self._chunks = self._translate()

    def parse(self, data: bytes) -> dict:
        return wire.decode_event(data)

    def failure(self, parsed: dict) -> UpstreamError | None:
        return wire.stream_error(parsed["error"]) if "error" in parsed else None

    def item(self, event: sse.SseEvent, parsed: dict) -> dict:
        return parsed

    async def _translate(self) -> AsyncGenerator[Chunk, None]:  # aclose() ends it early
        translator = self._translator
        async for event in self.items():
            if (chunk := translator.feed(event)) is not None:
                yield Chunk(encode(chunk), chunk, tokens=delta_tokens(chunk))
        if not translator.finished:
            raise UpstreamError(502, f"{self.provider} ended the stream before a finish reason")
        if (usage := translator.usage) is not None:
            last = translator.usage_chunk(usage)
            yield Chunk(encode(last), last, usage=usage)

    async def aclose(self) -> None:
        await UpstreamEventStream.aclose(self)  # the connection, then the translation
        await ReadAhead.aclose(self)


async def chat_reply(provider: str, call: ChatCall, response: aiohttp.ClientResponse) -> ChatReply:
    """A generateContent answer to `call` (an open 200 response) as an OpenAI chat reply and its usage."""
    answer = wire.checked_answer(await read_json(provider, response))
    reply, usage = wire.completion(answer, wire.completion_id(call.request_id), call.upstream_model,
                                   int(time.time()))
    return ChatReply(reply, usage)


async def opened_stream(kind: type[GeminiChatStream], call: ChatCall,
                        response: aiohttp.ClientResponse) -> GeminiChatStream:
    """A `kind` of stream over a streamGenerateContent response to `call`, read up to its first
    chunk (a refused prompt fails here); the connection is closed if it fails."""
    translator = wire.GeminiChunkTranslator(wire.completion_id(call.request_id), call.upstream_model,
                                            int(time.time()))
    stream = kind(response, translator)
    await stream.start()
    return stream


class GoogleProvider:
    @staticmethod
    def requires_max_tokens(upstream_model: str) -> bool:
        return False

    def __init__(self, provider_id: str, config: ProviderConfig, upstream: Upstream) -> None:
        self.id = provider_id  # the configuration's name for it: `[providers.<id>]`
        self._base = config.base_url.rstrip("/")
        self._api_key = config.api_key
        self._upstream = upstream.for_provider(config)
        self._timeout = timeout_for(config)

    def headers(self, api_key: str = "") -> dict[str, str]:
        """Request headers with the org's own key when it has one (BYOK), else the gateway's."""
        headers = {"Content-Type": "application/json"}
        if key := api_key or self._api_key:
            headers["x-goog-api-key"] = key
        return headers

    @staticmethod
    def chat_request(call: ChatCall, stream: bool) -> dict:
        """The generateContent request a chat call is translated into (streaming is in its URL)."""
        return request_wire.generate_content_body(call.body)

    @staticmethod
    def chat_allowance(body: dict) -> Allowance:
        return request_wire.allowance(request_wire.limits(body))  # as generationConfig carries them

    async def chat(self, call: ChatCall) -> ChatReply:
        return await chat_reply(self.id, call, await self._post_chat(call, "generateContent"))

    async def open_chat_stream(self, call: ChatCall) -> GeminiChatStream:
        return await opened_stream(GeminiChatStream, call, await self._post_chat(call, "streamGenerateContent?alt=sse"))

    async def _post_chat(self, call: ChatCall, action: str) -> aiohttp.ClientResponse:
        url = f"{self._base}/v1beta/models/{call.upstream_model}:{action}"
        return await post_json(self._upstream, self.id, url, self.chat_request(call, action != "generateContent"),
                               self.headers(call.api_key), self._timeout)

    async def generate_music(self, call: MusicCall, timeout_s: float) -> MusicReply:
        url = f"{self._base}/v1beta/models/{call.upstream_model}:generateContent"
        timeout = aiohttp.ClientTimeout(total=timeout_s, sock_connect=10)
        try:
            async with asyncio.timeout(timeout_s):  # the whole round trip, body included
                response = await post_json(self._upstream, self.id, url, music_body(call),
                                           self.headers(call.api_key), timeout)
                return music_reply(wire.checked_answer(await read_json(self.id, response), "music answer"))
        except TimeoutError:
            raise UpstreamError(504, f"google did not finish the generation within {timeout_s:g} s") from None
        except UpstreamError as exc:
            if exc.status == 400 and "block" in exc.message.lower():
                raise SafetyBlocked(exc.message) from None
            raise
