"""ConverseStream's answer: AWS's binary event stream (`application/vnd.amazon.eventstream`),
decoded as it arrives by botocore's own decoder, and translated into OpenAI chunks.

Each message is length-prefixed with CRCs over its prelude and the whole (botocore checks both);
the decoder holds at most one unfinished message (botocore refuses one declaring a payload over
24 MiB or headers over 128 KiB), so memory stays bounded however long the stream runs. An
`exception` message ends the stream with AWS's error, mapped as an HTTP error would be. Usage
comes only in the last event, `metadata`: a stream that ends before it is broken (502).
"""

import time
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator

import aiohttp
from botocore.eventstream import EventStreamBuffer, ParserError

from gateway.edge.errors import UpstreamError
from gateway.jsonio import encode, loads
from gateway.providers.base import Chunk
from gateway.providers.bedrock import answers
from gateway.providers.bedrock.converse import RESPONSE_TOOL
from gateway.providers.http import scrubbed
from gateway.providers.stream import ReadAhead
from gateway.providers.openai.adapter import delta_tokens
from gateway.providers.usage import Usage, openai_tier

READ_BYTES = 64 * 1024  # read from the socket at a time, at most


async def decoded(data: AsyncIterable[bytes]) -> AsyncIterator[tuple[str, dict]]:
    """(event type, JSON payload) of each event message in `data` as it completes, however the
    bytes are split; an exception or error message raises it, a broken frame is a 502."""
    decoder = EventStreamBuffer()
    try:
        async for part in data:
            decoder.add_data(part)
            for message in decoder:
                yield _event(message.headers, message.payload)
    except ParserError as exc:
        raise UpstreamError(502, f"bedrock sent a broken event stream: {type(exc).__name__}") from None


async def messages(response: aiohttp.ClientResponse) -> AsyncIterator[tuple[str, dict]]:
    """`decoded` over an answer read as it arrives; a read timeout is a 504, a cut connection a
    502, and an exception it reports leaves without the credentials its request carried."""
    try:
        async for message in decoded(response.content.iter_chunked(READ_BYTES)):
            yield message
    except UpstreamError as exc:
        raise scrubbed(exc, response) from None
    except TimeoutError:
        raise UpstreamError(504, "bedrock stopped streaming (read timeout)") from None
    except aiohttp.ClientError as exc:
        raise UpstreamError(502, f"bedrock stream broke off: {type(exc).__name__}") from None


def _event(headers: dict, payload: bytes) -> tuple[str, dict]:
    kind = headers.get(":message-type")
    if kind == "exception":
        raise answers.error(str(headers.get(":exception-type")), _decoded(payload).get("message", "no message"))
    if kind == "error":
        code, message = headers.get(":error-code"), headers.get(":error-message")
        raise UpstreamError(502, f"bedrock stream failed: {code}: {message}")
    return str(headers.get(":event-type")), _decoded(payload)


def _decoded(payload: bytes) -> dict:
    try:
        event = loads(payload)
    except ValueError:
        raise UpstreamError(502, "bedrock sent an event that is not JSON") from None
    if not isinstance(event, dict):
        raise UpstreamError(502, "bedrock sent an event that is not a JSON object")
    return event


class ConverseChunks:
    """ConverseStream events in, OpenAI chunks out; `usage` once `metadata` came. A JSON-schema
    answer's tool input (`converse.RESPONSE_TOOL`) is relayed as the answer's text."""

    def __init__(self, chat_id: str, model: str, created: int, as_json: bool) -> None:
        self.head = {"id": chat_id, "object": "chat.completion.chunk", "created": created, "model": model}
        self.as_json = as_json
        self.usage: Usage | None = None
        self.stopped = False
        self._calls: dict[int, int] = {}  # content block index -> OpenAI tool call index
        self._text_blocks: set[int] = set()  # blocks whose tool input is the answer's text

    def feed(self, kind: str, event: dict) -> dict | None:
        """The chunk of one event; None when it has none to send."""
        if kind == "messageStart":
            return self._chunk({"role": "assistant", "content": ""})
        if kind == "contentBlockStart":
            return self._started(_index(event), _part(event, "start").get("toolUse"))
        if kind == "contentBlockDelta":
            return self._delta(_index(event), _part(event, "delta"))
        if kind == "messageStop":
            self.stopped = True
            reason = answers.finish_reason(event.get("stopReason"), bool(self._text_blocks))
            return self._chunk({}, reason)
        if kind == "metadata":  # the only event naming the tier served: the usage chunk says it
            self.usage = answers.usage_of(event.get("usage"), event.get("serviceTier"))
            return {**self.head, "choices": [], "service_tier": openai_tier(self.usage.service_tier),
                    "usage": answers.openai_usage(self.usage)}
        return None  # contentBlockStop, and events added later that carry nothing to relay

    def _started(self, block: int, use: object) -> dict | None:
        if not isinstance(use, dict):
            return None
        if self.as_json and use.get("name") == RESPONSE_TOOL:
            self._text_blocks.add(block)
            return None
        call = self._calls.setdefault(block, len(self._calls))
        return self._chunk({"tool_calls": [{"index": call, "id": str(use.get("toolUseId") or ""), "type": "function",
                                            "function": {"name": str(use.get("name") or ""), "arguments": ""}}]})

    def _delta(self, block: int, delta: dict) -> dict | None:
        if isinstance(delta.get("text"), str):  # a JSON answer is its tool's input alone, as unstreamed
            return None if self.as_json else self._chunk({"content": delta["text"]})
        fragment = _part(delta, "toolUse").get("input")
        if not isinstance(fragment, str):
            return None  # reasoning and other deltas the OpenAI shape has no place for
        if block in self._text_blocks:
            return self._chunk({"content": fragment})
        if block not in self._calls:
            raise UpstreamError(502, "bedrock streamed tool input for a block it never started")
        return self._chunk({"tool_calls": [{"index": self._calls[block], "function": {"arguments": fragment}}]})

    def _chunk(self, delta: dict, finish_reason: str | None = None) -> dict:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        return {**self.head, "choices": [choice]}


def _part(event: dict, name: str) -> dict:
    """`event[name]`, an object (absent: empty); anything else is a broken event (502)."""
    part = event.get(name)
    if part is None:
        return {}
    if not isinstance(part, dict):
        raise UpstreamError(502, f"bedrock sent an event whose {name} is not an object")
    return part


def _index(event: dict) -> int:
    index = event.get("contentBlockIndex")
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        raise UpstreamError(502, "bedrock sent an event without a contentBlockIndex")
    return index


class BedrockChatStream(ReadAhead):
    """A ConverseStream answer as OpenAI chunks, the usage last, read ahead to the first."""

    def __init__(self, response: aiohttp.ClientResponse, chat_id: str, model: str, as_json: bool) -> None:
        self._response = response
        self._translator = ConverseChunks(chat_id, model, int(time.time()), as_json)
        self._chunks = self._translate()

    async def _translate(self) -> AsyncGenerator[Chunk, None]:  # aclose() ends it early
        translator = self._translator
        async for kind, event in messages(self._response):
            if (chunk := translator.feed(kind, event)) is not None:
                usage = translator.usage if kind == "metadata" else None
                yield Chunk(encode(chunk), chunk, usage=usage, tokens=delta_tokens(chunk))
        if translator.usage is None or not translator.stopped:
            raise UpstreamError(502, "bedrock ended the stream before its messageStop and metadata")

    async def aclose(self) -> None:
        self._response.close()  # closing the connection is how an HTTP client cancels
        await super().aclose()
