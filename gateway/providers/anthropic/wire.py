"""Pure translations for the anthropic adapter: OpenAI chat requests into Anthropic Messages
requests, and Anthropic answers (whole, or event by event) back into OpenAI chat shapes.

No I/O here. Bad input raises ApiError 400 naming the field (`errors.bad_request`); a failed
stream raises UpstreamError.
"""

import re
from types import MappingProxyType


from gateway.providers.usage import Usage, checked_usage, five_minute_writes, openai_tier, served_tier, token_count, \
    usage_report
from gateway.edge.errors import UpstreamError, bad_request
from gateway.jsonio import encode, loads
from gateway.providers.base import Allowance, MessageEvent, alternating, limit  # noqa: F401  (MessageEvent: read here too)
from gateway.providers.shapes import AnthropicEvent, AnthropicMessage, conforming

API_VERSION = "2023-06-01"
PROVIDER = "anthropic"
FINISH_REASONS = MappingProxyType({
    "end_turn": "stop", "stop_sequence": "stop", "pause_turn": "stop", "max_tokens": "length",
    "model_context_window_exceeded": "length", "tool_use": "tool_calls", "refusal": "content_filter"})
# The HTTP status Anthropic pairs with an error type, for errors reported inside a stream.
ERROR_STATUS = MappingProxyType({
    "invalid_request_error": 400, "authentication_error": 401, "permission_error": 403,
    "not_found_error": 404, "request_too_large": 413, "rate_limit_error": 429, "api_error": 500,
    "overloaded_error": 529})
TOOL_CHOICES = MappingProxyType({"auto": {"type": "auto"}, "none": {"type": "none"},
                                 "required": {"type": "any"}})
PASSED_THROUGH = ("temperature", "top_p")  # same name and meaning in both APIs
_DATA_URL = re.compile(r"data:([\w.+-]+/[\w.+-]+);base64,(.+)", re.DOTALL)
_EMPTY_SCHEMA = MappingProxyType({"type": "object", "properties": {}})


# -- requests: OpenAI chat -> Anthropic Messages -----------------------------------------------

def messages_body(body: dict, model: str) -> dict:
    """The Anthropic request for an OpenAI chat `body`, addressed to upstream `model`."""
    system, turns = split_system(body.get("messages") or [])
    request = {"model": model, **limits(body), "messages": merge_turns(turns)}
    if system:
        request["system"] = system
    request.update({name: body[name] for name in PASSED_THROUGH if body.get(name) is not None})
    if stops := stop_sequences(body.get("stop")):
        request["stop_sequences"] = stops
    if body.get("tools"):
        request["tools"] = [tool_of(index, tool) for index, tool in enumerate(objects(body["tools"], "tools"))]
        if choice := tool_choice_of(body.get("tool_choice"), body.get("parallel_tool_calls")):
            request["tool_choice"] = choice
    if body.get("user"):
        request["metadata"] = {"user_id": str(body["user"])}
    return request


def limits(body: dict) -> dict:
    """The fields of the Anthropic request that bound its answer, for an OpenAI chat `body`."""
    return {"max_tokens": max_tokens_of(body)}


def allowance(body: dict) -> Allowance:
    """What an Anthropic Messages body lets the model write: max_tokens (thinking included), one answer."""
    return Allowance(limit(body.get("max_tokens")))


def max_tokens_of(body: dict) -> int:
    """The token limit: `max_completion_tokens` counts as `max_tokens`; the tighter one wins."""
    limits = [body[name] for name in ("max_tokens", "max_completion_tokens") if body.get(name) is not None]
    if not limits:
        raise bad_request("max_tokens is required for Anthropic models", "max_tokens")
    return min(limits)


def objects(value: object, where: str, param: str | None = None) -> list[dict]:
    """`value` when it is a list of JSON objects; 400 naming `where` otherwise."""
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise bad_request(f"{where} must be an array of objects", param or where)
    return value


def _object(value: object) -> dict:
    """`value` when it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def stop_sequences(stop: str | list | None) -> list[str]:
    if stop is None:
        return []
    return [stop] if isinstance(stop, str) else list(stop)


def split_system(messages: list[dict]) -> tuple[str, list[tuple[str, list[dict]]]]:
    """System and developer messages joined into the top-level `system`; the rest as turns."""
    system, turns = [], []
    for index, message in enumerate(messages):
        if message.get("role") in ("system", "developer"):
            system.append(plain_text(message.get("content"), index))
        else:
            turns.append(turn_of(index, message))
    return "\n\n".join(text for text in system if text), turns


def turn_of(index: int, message: dict) -> tuple[str, list[dict]]:
    """(Anthropic role, content blocks) of one OpenAI message; tool results are user turns."""
    role = message.get("role")
    if role == "user":
        return "user", content_blocks(index, message.get("content"))
    if role == "assistant":
        calls = objects(message.get("tool_calls") or [], f"messages[{index}].tool_calls", "messages")
        calls = [tool_use_of(index, n, call) for n, call in enumerate(calls)]
        return "assistant", content_blocks(index, message.get("content")) + calls
    if role == "tool":
        return "user", [tool_result_of(index, message)]
    raise bad_request(f"messages[{index}]: role {role!r} is not supported for Anthropic models", "messages")


def merge_turns(turns: list[tuple[str, list[dict]]]) -> list[dict]:
    """Consecutive turns of the same role merged into one, as Anthropic requires alternation."""
    return [_collapsed(turn) for turn in alternating(turns)]


def _collapsed(turn: dict) -> dict:
    """A turn of a single text block written as a plain string, as clients usually write it."""
    blocks = turn["content"]
    if len(blocks) == 1 and blocks[0]["type"] == "text":
        return {"role": turn["role"], "content": blocks[0]["text"]}
    return turn


def content_blocks(index: int, content: str | list | None) -> list[dict]:
    """Anthropic blocks of an OpenAI message content (a string or a list of parts)."""
    if content is None or content == "":
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [part_block(index, part) for part in content]


def part_block(index: int, part: dict) -> dict:
    kind = part.get("type")
    if kind == "text":
        return {"type": "text", "text": part.get("text") or ""}
    if kind == "image_url":
        return image_block(index, part.get("image_url"))
    raise bad_request(f"messages[{index}]: content parts of type {kind!r} are not supported for"
                      " Anthropic models", "messages")


def image_block(index: int, image: dict | str | None) -> dict:
    """A base64 image block from a data URL; the gateway fetches no URLs on a client's behalf."""
    url = image.get("url", "") if isinstance(image, dict) else image or ""
    match = _DATA_URL.fullmatch(url)
    if match is None:
        raise bad_request(f"messages[{index}]: image_url must be a data URL"
                          " (data:image/png;base64,...); the gateway does not fetch images", "messages")
    return {"type": "image", "source": {"type": "base64", "media_type": match[1], "data": match[2]}}


def tool_use_of(index: int, number: int, call: dict) -> dict:
    """An assistant's OpenAI tool call as a `tool_use` block (its JSON arguments decoded)."""
    function = _object(call.get("function"))
    try:
        arguments = loads(function.get("arguments") or "{}")
    except (ValueError, TypeError):
        arguments = None
    if not isinstance(arguments, dict) or not function.get("name"):
        raise bad_request(f"messages[{index}].tool_calls[{number}] needs function.name and function.arguments"
                          " holding a JSON object", "messages")
    return {"type": "tool_use", "id": call.get("id"), "name": function.get("name"), "input": arguments}


def tool_result_of(index: int, message: dict) -> dict:
    if not message.get("tool_call_id"):
        raise bad_request(f"messages[{index}]: a tool message needs tool_call_id", "messages")
    return {"type": "tool_result", "tool_use_id": message["tool_call_id"],
            "content": plain_text(message.get("content"), index)}


def plain_text(content: str | list | None, index: int) -> str:
    """The text of a content that may only hold text (system prompts, tool results)."""
    if content is None or isinstance(content, str):
        return content or ""
    if any(part.get("type") != "text" for part in content):
        raise bad_request(f"messages[{index}]: only text content is supported here", "messages")
    return "".join(part.get("text") or "" for part in content)


def tool_of(index: int, tool: dict) -> dict:
    """An OpenAI function tool as an Anthropic tool."""
    function = _object(tool.get("function"))
    if tool.get("type") != "function" or not function.get("name"):
        raise bad_request(f"tools[{index}]: only function tools with a name are supported", "tools")
    anthropic_tool = {"name": function["name"], "input_schema": function.get("parameters") or dict(_EMPTY_SCHEMA)}
    if function.get("description"):
        anthropic_tool["description"] = function["description"]
    return anthropic_tool


def tool_choice_of(choice: str | dict | None, parallel: bool | None) -> dict | None:
    """OpenAI's tool_choice (and parallel_tool_calls=false) as Anthropic's tool_choice."""
    if isinstance(choice, dict) and isinstance(choice.get("function"), dict):
        mapped = {"type": "tool", "name": choice["function"].get("name")}
    elif choice is None:
        mapped = None
    elif isinstance(choice, str) and choice in TOOL_CHOICES:
        mapped = dict(TOOL_CHOICES[choice])
    else:
        raise bad_request(f"tool_choice {choice!r} is not one of auto, none, required or a function",
                          "tool_choice")
    if parallel is False and (mapped or {}).get("type") != "none":
        mapped = {**(mapped or {"type": "auto"}), "disable_parallel_tool_use": True}
    return mapped


# -- answers: Anthropic -> OpenAI chat ---------------------------------------------------------

def usage_of(usage: object) -> Usage:
    """Anthropic usage as billing sees it: cache reads and writes are part of the prompt, the
    writes split by lifetime (`cache_creation` holds the one-hour part of cache_creation_input_tokens)
    and the tier is the one it says it served. Checked (gateway.providers.usage): UpstreamError
    502 when it is not sound."""
    report = usage_report(PROVIDER, usage)
    cache_read = token_count(PROVIDER, report, "cache_read_input_tokens")
    cache_write = token_count(PROVIDER, report, "cache_creation_input_tokens")
    by_lifetime = usage_report(PROVIDER, report.get("cache_creation"), "cache_creation")
    token_count(PROVIDER, by_lifetime, "ephemeral_5m_input_tokens")  # not used, but a broken one is a broken report
    one_hour = token_count(PROVIDER, by_lifetime, "ephemeral_1h_input_tokens")
    prompt = token_count(PROVIDER, report, "input_tokens") + cache_write + cache_read
    return checked_usage(PROVIDER, Usage(prompt, token_count(PROVIDER, report, "output_tokens"), cache_read,
                                         five_minute_writes(PROVIDER, cache_write, one_hour), one_hour,
                                         served_tier(PROVIDER, report.get("service_tier"))))


def openai_usage(usage: Usage) -> dict:
    return {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
            "total_tokens": usage.total_tokens,
            "prompt_tokens_details": {"cached_tokens": usage.cached_prompt_tokens}}


def finish_reason(stop_reason: str | None) -> str | None:
    return None if stop_reason is None else FINISH_REASONS.get(stop_reason, "stop")


def completion(message: dict, created: int) -> dict:
    """An Anthropic `message` as an OpenAI `chat.completion`."""
    blocks = message.get("content") or []
    text = "".join(block.get("text") or "" for block in blocks if block.get("type") == "text")
    calls = [tool_call(block) for block in blocks if block.get("type") == "tool_use"]
    reply: dict = {"role": "assistant", "content": text if text or not calls else None}
    if calls:
        reply["tool_calls"] = calls
    choice = {"index": 0, "message": reply, "logprobs": None,
              "finish_reason": finish_reason(message.get("stop_reason")) or "stop"}
    usage = usage_of(message.get("usage"))
    return {"id": message.get("id"), "object": "chat.completion", "created": created,
            "model": message.get("model"), "choices": [choice], "service_tier": openai_tier(usage.service_tier),
            "usage": openai_usage(usage)}


def tool_call(block: dict) -> dict:
    arguments = encode(block.get("input") or {}).decode()
    return {"id": block.get("id"), "type": "function",
            "function": {"name": block.get("name"), "arguments": arguments}}


def stream_error(event: dict) -> UpstreamError:
    """The failure an `error` event reports in the middle of a stream."""
    error = event.get("error") or {}
    kind = str(error.get("type") or "error")
    message = str(error.get("message") or "no message")  # redacted (by value first) and cut short by http.scrubbed
    return UpstreamError(ERROR_STATUS.get(kind, 502), f"anthropic stream failed: {kind}: {message}")


def decode_event(data: bytes) -> dict:
    """One event's JSON data; anything else is the provider's failure."""
    try:
        event = loads(data)
    except ValueError:
        raise UpstreamError(502, "anthropic sent an event that is not JSON") from None
    if not isinstance(event, dict):
        raise UpstreamError(502, "anthropic sent an event that is not a JSON object")
    conforming(PROVIDER, event, AnthropicEvent, "stream event")
    return event


def checked_message(message: dict) -> dict:
    """A whole Anthropic message, once its shape is checked (UpstreamError 502 otherwise)."""
    conforming(PROVIDER, message, AnthropicMessage, "message")
    return message


class AnthropicEventTranslator:
    """Anthropic stream events in, OpenAI `chat.completion.chunk` objects out, one at a time.

    A tool_use block becomes a tool call (its OpenAI index counts tool calls, not blocks) and its
    `input_json_delta` pieces become argument fragments. message_stop yields the final chunk
    without choices that carries the usage; `usage` is the Usage billing needs.
    """

    def __init__(self, created: int) -> None:
        self.head = {"id": "", "object": "chat.completion.chunk", "created": created, "model": ""}
        self.reported: dict = {}  # Anthropic usage fields, the latest value of each
        # content block index (None when an event leaves it out) -> OpenAI tool call index
        self.tool_index: dict[int | None, int] = {}
        self.finished = False

    @property
    def usage(self) -> Usage:
        return usage_of(self.reported)

    def feed(self, event: dict) -> list[dict]:
        """The OpenAI chunks one event translates into (none for ping, block stops, unknowns).
        An `error` event never gets here: the adapter raises it, scrubbed (`stream_error`)."""
        kind = event.get("type")
        if kind == "message_start":
            return self._start(event.get("message") or {})
        if kind == "content_block_start":
            return self._block_start(event.get("index"), event.get("content_block") or {})
        if kind == "content_block_delta":
            return self._block_delta(event.get("index"), event.get("delta") or {})
        if kind == "message_delta":
            self._report(event.get("usage"))
            return [self._chunk({}, finish_reason((event.get("delta") or {}).get("stop_reason")))]
        if kind == "message_stop":
            self.finished = True
            return [{**self.head, "choices": [], "usage": openai_usage(self.usage)}]
        return []

    def _start(self, message: dict) -> list[dict]:
        self.head.update(id=message.get("id") or "", model=message.get("model") or "")
        self._report(message.get("usage"))
        # OpenAI's chunks each name the tier served; Anthropic names it once, here.
        self.head["service_tier"] = openai_tier(served_tier(PROVIDER, self.reported.get("service_tier")))
        return [self._chunk({"role": "assistant", "content": ""})]

    def _block_start(self, index: int | None, block: dict) -> list[dict]:
        if block.get("type") == "tool_use":
            self.tool_index[index] = position = len(self.tool_index)
            call = {"index": position, "id": block.get("id"), "type": "function",
                    "function": {"name": block.get("name"), "arguments": ""}}
            return [self._chunk({"tool_calls": [call]})]
        if block.get("type") == "text" and block.get("text"):
            return [self._chunk({"content": block["text"]})]
        return []

    def _block_delta(self, index: int | None, delta: dict) -> list[dict]:
        if delta.get("type") == "text_delta" and delta.get("text"):
            return [self._chunk({"content": delta["text"]})]
        if delta.get("type") == "input_json_delta" and delta.get("partial_json") and index in self.tool_index:
            fragment = {"index": self.tool_index[index], "function": {"arguments": delta["partial_json"]}}
            return [self._chunk({"tool_calls": [fragment]})]
        return []  # thinking and signature deltas have no OpenAI counterpart

    def _report(self, usage: dict | None) -> None:
        # Counts are cumulative; a field left out (or null) keeps its earlier value.
        self.reported.update({k: v for k, v in (usage or {}).items() if v is not None})

    def _chunk(self, delta: dict, finish: str | None = None) -> dict:
        return {**self.head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def delta_tokens(event: dict) -> int:
    """One output token per content delta that carries something (text, tool input, thinking)."""
    if event.get("type") != "content_block_delta":
        return 0
    delta = event.get("delta") or {}
    return int(any(delta.get(field) for field in ("text", "partial_json", "thinking")))

