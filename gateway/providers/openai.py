"""The OpenAI adapter: OpenAI's own wire format, so requests pass through nearly untouched."""

import asyncio
from collections.abc import AsyncIterator

import aiohttp

from gateway import sse
from gateway.billing import Usage
from gateway.config import ProviderConfig
from gateway.errors import UpstreamError
from gateway.jsonio import loads
from gateway.providers.base import ChatCall, ChatReply, Chunk
from gateway.providers.http import post_json, read_json, timeout_for


def usage_of(usage: dict | None) -> Usage:
    usage = usage or {}
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    return Usage(int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0), int(cached))


def delta_tokens(chunk: dict) -> int:
    """Completion tokens a chunk delivered: one per choice with content or a tool-call delta."""
    return sum(1 for choice in chunk.get("choices") or ()
               if (delta := choice.get("delta") or {}).get("content") or delta.get("tool_calls"))


class OpenAIChatStream:
    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response

    async def __aiter__(self) -> AsyncIterator[Chunk]:
        try:
            async for event in sse.events(self._response.content):
                if event.data == b"[DONE]":
                    return
                yield self._chunk(event.data)
        except asyncio.TimeoutError:
            raise UpstreamError(504, "openai stopped streaming (read timeout)") from None
        except aiohttp.ClientError as exc:
            raise UpstreamError(502, f"openai stream broke off: {type(exc).__name__}") from None

    @staticmethod
    def _chunk(data: bytes) -> Chunk:
        try:
            parsed = loads(data)
        except ValueError:
            raise UpstreamError(502, "openai sent a chunk that is not JSON") from None
        if parsed.get("usage") and not parsed.get("choices"):
            return Chunk(data, parsed, usage=usage_of(parsed["usage"]))
        return Chunk(data, parsed, tokens=delta_tokens(parsed))

    async def aclose(self) -> None:
        self._response.close()  # closing the connection is how an HTTP client cancels


class OpenAIProvider:
    id = "openai"
    capabilities = frozenset({"chat"})
    requires_max_tokens = False

    def __init__(self, config: ProviderConfig, session: aiohttp.ClientSession) -> None:
        self._base = config.base_url.rstrip("/")
        self._url = self._base + "/chat/completions"
        self._api_key = config.api_key
        self._session = session
        self._timeout = timeout_for(config)

    def headers(self, api_key: str = "", content_type: str | None = "application/json") -> dict[str, str]:
        """Request headers with the org's own key when it has one (BYOK), else the gateway's."""
        headers = {"Content-Type": content_type} if content_type else {}
        if key := api_key or self._api_key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    async def chat(self, call: ChatCall) -> ChatReply:
        body = {**call.body, "model": call.upstream_model, "stream": False}
        body.pop("stream_options", None)
        response = await post_json(self._session, self.id, self._url, body, self.headers(call.api_key),
                                   self._timeout)
        reply = await read_json(self.id, response)
        return ChatReply(reply, usage_of(reply.get("usage")))

    async def open_chat_stream(self, call: ChatCall) -> OpenAIChatStream:
        # Always ask for usage, so a stream is billed even when the client did not ask.
        body = {**call.body, "model": call.upstream_model, "stream": True,
                "stream_options": {**(call.body.get("stream_options") or {}), "include_usage": True}}
        response = await post_json(self._session, self.id, self._url, body, self.headers(call.api_key),
                                   self._timeout)
        return OpenAIChatStream(response)
