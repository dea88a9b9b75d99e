"""Pure translation for the google adapter's chat answers: Gemini `generateContent` answers
(whole, or event by event from `streamGenerateContent`) back into OpenAI chat shapes, and their
usage as billing counts it (the requests go out through `chat_request`).

No I/O here. A refused prompt, a malformed answer or event, or a failed stream raises
UpstreamError.
"""

from collections.abc import Callable
from types import MappingProxyType

from gateway.providers.usage import Usage, checked_usage, token_count, usage_report
from gateway.edge.errors import UpstreamError
from gateway.jsonio import encode, loads
from gateway.providers.base import completion_id  # noqa: F401  (the adapter reads it here)
from gateway.providers.shapes import GeminiAnswer, conforming

PROVIDER = "google"
FINISH_REASONS = MappingProxyType({
    "STOP": "stop", "MAX_TOKENS": "length", "SAFETY": "content_filter", "RECITATION": "content_filter",
    "BLOCKLIST": "content_filter", "PROHIBITED_CONTENT": "content_filter", "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter"})  # anything else (OTHER, LANGUAGE, ...) ends as "stop"


def refuse_blocked(answer: dict) -> None:
    """A prompt Gemini refused (promptFeedback.blockReason, no candidates) is an error, never
    an empty success."""
    feedback = answer.get("promptFeedback") or {}
    if (reason := feedback.get("blockReason")) and not answer.get("candidates"):
        detail = f": {feedback['blockReasonMessage']}" if feedback.get("blockReasonMessage") else ""
        raise UpstreamError(400, f"google blocked the prompt ({reason}){detail}")


def completion(answer: dict, chat_id: str, model: str, created: int) -> tuple[dict, Usage]:
    """A Gemini GenerateContentResponse as an OpenAI `chat.completion`, with its usage."""
    refuse_blocked(answer)
    candidates = answer.get("candidates") or []
    if not candidates:
        raise UpstreamError(502, "google returned an answer without candidates")
    choices = [choice_of(chat_id, position, candidate) for position, candidate in enumerate(candidates)]
    metadata = answer.get("usageMetadata")
    usage = usage_of(metadata)
    return {"id": chat_id, "object": "chat.completion", "created": created, "model": model,
            "choices": choices, "usage": openai_usage(usage, reasoning_tokens(metadata))}, usage


def choice_of(chat_id: str, position: int, candidate: dict) -> dict:
    index = candidate.get("index", position)
    parts = (candidate.get("content") or {}).get("parts") or []
    text = visible_text(parts)
    calls = [tool_call(chat_id, index, number, part["functionCall"])
             for number, part in enumerate(p for p in parts if p.get("functionCall"))]
    message: dict = {"role": "assistant", "content": text if text or not calls else None}
    if calls:
        message["tool_calls"] = calls
    return {"index": index, "message": message, "logprobs": None,
            "finish_reason": finish_reason(candidate.get("finishReason"), bool(calls)) or "stop"}


def visible_text(parts: list[dict]) -> str:
    """The answer's text; thought summaries (`thought: true`) are not part of it."""
    return "".join(part.get("text") or "" for part in parts if not part.get("thought"))


def tool_call(chat_id: str, choice: int, number: int, call: dict) -> dict:
    """A Gemini functionCall as an OpenAI tool call; Gemini rarely gives ids, so one is made."""
    call_id = call.get("id") or f"call_{chat_id.removeprefix('chatcmpl-')}_{choice}_{number}"
    return {"id": call_id, "type": "function",
            "function": {"name": call.get("name"), "arguments": encode(call.get("args") or {}).decode()}}


def finish_reason(reason: str | None, called: bool) -> str | None:
    if reason is None:
        return None
    if called and reason == "STOP":
        return "tool_calls"
    return FINISH_REASONS.get(reason, "stop")


def usage_of(metadata: object) -> Usage:
    """Gemini usageMetadata as billing sees it: thinking is output, tool-use prompts are input.
    Checked (gateway.providers.usage): UpstreamError 502 when it is not sound."""
    count = _counter(metadata)
    return checked_usage(PROVIDER, Usage(count("promptTokenCount") + count("toolUsePromptTokenCount"),
                                         count("candidatesTokenCount") + count("thoughtsTokenCount"),
                                         count("cachedContentTokenCount")))


def reasoning_tokens(metadata: object) -> int:
    """The thinking tokens (part of usage_of's completion tokens), which OpenAI reports apart."""
    return _counter(metadata)("thoughtsTokenCount")


def openai_usage(usage: Usage, reasoning: int) -> dict:
    return {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
            "total_tokens": usage.total_tokens,
            "prompt_tokens_details": {"cached_tokens": usage.cached_prompt_tokens},
            "completion_tokens_details": {"reasoning_tokens": reasoning}}


def _counter(metadata: object) -> Callable[[str], int]:
    report = usage_report(PROVIDER, metadata)
    return lambda name: token_count(PROVIDER, report, name)


def stream_error(error: object) -> UpstreamError:
    """The failure an `error` object reports in the middle of a stream."""
    error = error if isinstance(error, dict) else {}
    reported = error.get("code")
    code = reported if isinstance(reported, int) else 502
    message = str(error.get("message") or "no message")  # redacted (by value first) and cut short by http.scrubbed
    return UpstreamError(code if 400 <= code < 600 else 502,
                         f"google stream failed: {error.get('status') or code}: {message}")


def decode_event(data: bytes) -> dict:
    """One event's JSON data; anything else is the provider's failure."""
    try:
        event = loads(data)
    except ValueError:
        raise UpstreamError(502, "google sent an event that is not JSON") from None
    if not isinstance(event, dict):
        raise UpstreamError(502, "google sent an event that is not a JSON object")
    return checked_answer(event, "stream event")


def checked_answer(answer: dict, what: str = "answer") -> dict:
    """A GenerateContentResponse, once its shape is checked (UpstreamError 502 otherwise)."""
    conforming(PROVIDER, answer, GeminiAnswer, what)
    return answer


class GeminiChunkTranslator:
    """Gemini stream events (each a GenerateContentResponse) in, one OpenAI chunk per event out.

    Each choice's first delta carries the role; function calls arrive whole and become whole
    tool calls, numbered per choice. usageMetadata is cumulative, so the last one reported is
    the stream's usage (`usage`, None while none came).
    """

    def __init__(self, chat_id: str, model: str, created: int) -> None:
        self.chat_id = chat_id
        self.head = {"id": chat_id, "object": "chat.completion.chunk", "created": created, "model": model}
        self.reported: dict | None = None
        self.calls: dict[int, int] = {}  # choice index -> tool calls sent so far
        self.started: set[int] = set()  # choices whose role has been sent
        self.finished = False  # a finish reason arrived

    @property
    def usage(self) -> Usage | None:
        return None if self.reported is None else usage_of(self.reported)

    def feed(self, event: dict) -> dict | None:
        """The OpenAI chunk of one event; None when it carries no candidate. An `error` event
        never gets here: the adapter raises it, scrubbed (`stream_error`)."""
        refuse_blocked(event)
        if event.get("usageMetadata"):
            self.reported = event["usageMetadata"]
        choices = [self._choice(position, candidate)
                   for position, candidate in enumerate(event.get("candidates") or ())]
        return {**self.head, "choices": choices} if choices else None

    def usage_chunk(self, usage: Usage) -> dict:
        """The final chunk without choices that carries the usage (`usage`, computed once by the
        caller), as OpenAI ends a stream."""
        return {**self.head, "choices": [], "usage": openai_usage(usage, reasoning_tokens(self.reported))}

    def _choice(self, position: int, candidate: dict) -> dict:
        index = candidate.get("index", position)
        parts = (candidate.get("content") or {}).get("parts") or []
        delta: dict = {} if index in self.started else {"role": "assistant"}
        self.started.add(index)
        if text := visible_text(parts):
            delta["content"] = text
        if calls := self._tool_calls(index, parts):
            delta["tool_calls"] = calls
        reason = candidate.get("finishReason")
        self.finished = self.finished or reason is not None
        return {"index": index, "delta": delta,
                "finish_reason": finish_reason(reason, self.calls.get(index, 0) > 0)}

    def _tool_calls(self, index: int, parts: list[dict]) -> list[dict]:
        calls = []
        for part in (p for p in parts if p.get("functionCall")):
            number = self.calls.get(index, 0)
            self.calls[index] = number + 1
            calls.append({"index": number, **tool_call(self.chat_id, index, number, part["functionCall"])})
        return calls
