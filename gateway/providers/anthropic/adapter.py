"""The Anthropic adapter: the Messages API (`x-api-key`, `anthropic-version`).

OpenAI-shaped chat is translated both ways (`wire`). The native methods `messages`
and `open_messages_stream` serve `POST /v1/messages`: the client's Anthropic body goes up as
it is and Anthropic's answer and events come back as they are; `count_tokens` serves
`POST /v1/messages/count_tokens` the same way. Anthropic refuses requests
without `max_tokens`, so the gateway refuses them first (spec 7).
"""

import time
from collections.abc import AsyncIterator

import aiohttp

from gateway.edge import sse
from gateway.providers.usage import token_count
from gateway.config import ProviderConfig
from gateway.edge.errors import UpstreamError
from gateway.jsonio import encode
from gateway.providers.anthropic import wire
from gateway.providers.base import Allowance, ChatCall, ChatReply, Chunk
from gateway.providers.http import Upstream, post_json, read_json, timeout_for
from gateway.providers.openai.adapter import delta_tokens
from gateway.providers.stream import UpstreamEventStream


class AnthropicEventStream(UpstreamEventStream[tuple[str, bytes, dict]]):
    """Anthropic's events as they arrive: (name, raw data, decoded data) of each; an `error` event raises."""

    provider = "anthropic"

    def parse(self, data: bytes) -> dict:
        return wire.decode_event(data)

    def failure(self, parsed: dict) -> UpstreamError | None:
        return wire.stream_error(parsed) if parsed.get("type") == "error" else None

    def item(self, event: sse.SseEvent, parsed: dict) -> tuple[str, bytes, dict]:
        return event.name.decode() or str(parsed.get("type")), event.data, parsed


def _unfinished(provider: str) -> UpstreamError:
    return UpstreamError(502, f"{provider} ended the stream before message_stop")


class AnthropicChatStream(AnthropicEventStream):
    """Anthropic's events translated into OpenAI chunks as they arrive."""

    async def __aiter__(self) -> AsyncIterator[Chunk]:
        translator = wire.AnthropicEventTranslator(int(time.time()))
        async for _, _, data in self.items():
            for chunk in translator.feed(data):
                if chunk["choices"]:
                    yield Chunk(encode(chunk), chunk, tokens=delta_tokens(chunk))
                else:
                    yield Chunk(encode(chunk), chunk, usage=translator.usage)
        if not translator.finished:
            raise _unfinished(self.provider)


class AnthropicMessageStream(AnthropicEventStream):
    """Anthropic's own events, relayed unchanged except that message_delta carries the usage of
    the whole message (message_start's input counts merged with the final output count)."""

    async def __aiter__(self) -> AsyncIterator[wire.MessageEvent]:
        reported: dict = {}
        stopped = False
        async for name, raw, data in self.items():
            if name == "message_start":
                reported.update((data.get("message") or {}).get("usage") or {})
            if name == "message_delta":
                reported.update({k: v for k, v in (data.get("usage") or {}).items() if v is not None})
                data = {**data, "usage": dict(reported)}
                yield wire.MessageEvent(name, sse.event_frame(name, encode(data)), data, wire.usage_of(reported))
                continue
            stopped = name == "message_stop"
            yield wire.MessageEvent(name, sse.event_frame(name, raw), data, tokens=wire.delta_tokens(data))
        if not stopped:
            raise _unfinished(self.provider)


def chat_request(call: ChatCall, stream: bool) -> dict:
    """The Messages request an OpenAI chat call is translated into."""
    return {**wire.messages_body(call.body, call.upstream_model), **({"stream": True} if stream else {})}


def chat_reply(message: dict) -> ChatReply:
    """An Anthropic `message` (shape checked) as an OpenAI chat reply and its usage."""
    return ChatReply(wire.completion(message, int(time.time())), wire.usage_of(message.get("usage")))


def messages_request(call: ChatCall, stream: bool) -> dict:
    """The Messages request a native call sends: the client's body as it is, for the upstream model."""
    return {**call.body, "model": call.upstream_model, **({"stream": True} if stream else {})}


class AnthropicProvider:
    @staticmethod
    def requires_max_tokens(upstream_model: str) -> bool:
        return True

    def __init__(self, provider_id: str, config: ProviderConfig, upstream: Upstream) -> None:
        self.id = provider_id  # the configuration's name for it: `[providers.<id>]`
        self._url = config.base_url.rstrip("/") + "/v1/messages"
        self._count_url = self._url + "/count_tokens"
        self._api_key = config.api_key
        self._upstream = upstream.for_provider(config)
        self._timeout = timeout_for(config)

    def headers(self, api_key: str = "") -> dict[str, str]:
        """Request headers with the org's own key when it has one (BYOK), else the gateway's."""
        headers = {"Content-Type": "application/json", "anthropic-version": wire.API_VERSION}
        if key := api_key or self._api_key:
            headers["x-api-key"] = key
        return headers

    chat_request = staticmethod(chat_request)
    messages_request = staticmethod(messages_request)
    messages_allowance = staticmethod(wire.allowance)  # the body goes up as it is

    @staticmethod
    def chat_allowance(body: dict) -> Allowance:
        return wire.allowance(wire.limits(body))  # the limits as `chat_request` translates them

    async def chat(self, call: ChatCall) -> ChatReply:
        return chat_reply(await self._message(call.api_key, chat_request(call, False)))

    async def open_chat_stream(self, call: ChatCall) -> AnthropicChatStream:
        return AnthropicChatStream(await self._post(call.api_key, chat_request(call, True)))

    async def messages(self, call: ChatCall) -> ChatReply:
        """A native Messages call: `call.body` is an Anthropic request; the reply an Anthropic message."""
        message = await self._message(call.api_key, messages_request(call, False))
        return ChatReply(message, wire.usage_of(message.get("usage")))

    async def open_messages_stream(self, call: ChatCall) -> AnthropicMessageStream:
        return AnthropicMessageStream(await self._post(call.api_key, messages_request(call, True)))

    async def count_tokens(self, call: ChatCall) -> int:
        """Anthropic's own count of a Messages request's input tokens (free at Anthropic)."""
        body = {**call.body, "model": call.upstream_model}
        response = await post_json(self._upstream, self.id, self._count_url, body, self.headers(call.api_key),
                                   self._timeout)
        counted = await read_json(self.id, response)
        if counted.get("input_tokens") is None:
            raise UpstreamError(502, "anthropic sent a token count without input_tokens")
        return token_count(self.id, counted, "input_tokens")

    async def _message(self, api_key: str, body: dict) -> dict:
        return wire.checked_message(await read_json(self.id, await self._post(api_key, body)))

    async def _post(self, api_key: str, body: dict) -> aiohttp.ClientResponse:
        return await post_json(self._upstream, self.id, self._url, body, self.headers(api_key), self._timeout)
