"""Pure translations for the google adapter's chat: OpenAI chat requests into Gemini
`generateContent` requests, and Gemini answers (whole, or event by event) back into OpenAI
chat shapes.

Gemini knows two roles, `user` and `model`: system and developer messages become
`systemInstruction`, tool results are user turns of `functionResponse` parts, and consecutive
turns of one role are merged. No I/O here. Bad input raises ApiError 400 naming the field
(`errors.bad_request`); a refused prompt or a failed stream raises UpstreamError.
"""

import re
from types import MappingProxyType

from gateway.billing import Usage, checked_usage, token_count, usage_report
from gateway.errors import UpstreamError, bad_request
from gateway.jsonio import encode, loads
from gateway.providers.shapes import GeminiAnswer, conforming

PROVIDER = "google"
ROLES = MappingProxyType({"user": "user", "assistant": "model", "tool": "user"})
SYSTEM_ROLES = frozenset({"system", "developer"})
FINISH_REASONS = MappingProxyType({
    "STOP": "stop", "MAX_TOKENS": "length", "SAFETY": "content_filter", "RECITATION": "content_filter",
    "BLOCKLIST": "content_filter", "PROHIBITED_CONTENT": "content_filter", "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter"})  # anything else (OTHER, LANGUAGE, ...) ends as "stop"
# OpenAI request fields with a generationConfig counterpart, and that counterpart's name.
GENERATION_FIELDS = MappingProxyType({
    "temperature": "temperature", "top_p": "topP", "top_k": "topK", "n": "candidateCount",
    "seed": "seed", "presence_penalty": "presencePenalty", "frequency_penalty": "frequencyPenalty"})
TOOL_MODES = MappingProxyType({"auto": "AUTO", "none": "NONE", "required": "ANY"})
# reasoning_effort as a thinking budget, the values Google's own OpenAI endpoint uses.
THINKING_BUDGETS = MappingProxyType({"none": 0, "minimal": 1024, "low": 1024, "medium": 8192,
                                     "high": 24576})
_DATA_URL = re.compile(r"data:([\w.+-]+/[\w.+-]+);base64,(.+)", re.DOTALL)


# -- requests: OpenAI chat -> Gemini generateContent -------------------------------------------

def generate_content_body(body: dict) -> dict:
    """The Gemini request for an OpenAI chat `body` (the model goes in the URL, not the body)."""
    messages = body.get("messages") or []
    request: dict = {"contents": contents_of(messages)}
    if system := system_parts(messages):
        request["systemInstruction"] = {"parts": system}
    if config := generation_config(body):
        request["generationConfig"] = config
    if body.get("tools"):
        declarations = [function_of(index, tool) for index, tool in enumerate(body["tools"])]
        request["tools"] = [{"functionDeclarations": declarations}]
    if body.get("tool_choice") is not None:
        request["toolConfig"] = tool_config(body["tool_choice"])
    return request


def system_parts(messages: list[dict]) -> list[dict]:
    """The text of every system and developer message, in order, as systemInstruction parts."""
    return [{"text": text} for index, message in enumerate(messages)
            if message.get("role") in SYSTEM_ROLES
            for text in text_pieces(index, message.get("content")) if text]


def contents_of(messages: list[dict]) -> list[dict]:
    """The conversation as Gemini contents: user and model turns, consecutive ones merged."""
    names = tool_names(messages)
    turns = [turn_of(index, message, names) for index, message in enumerate(messages)
             if message.get("role") not in SYSTEM_ROLES]
    contents = merge_turns([(role, parts) for role, parts in turns if parts])
    if not contents:
        raise bad_request("messages must hold at least one user or assistant message with content",
                          "messages")
    return contents


def tool_names(messages: list[dict]) -> dict[str, str]:
    """Tool call id -> function name: Gemini answers a function by name, OpenAI by call id."""
    return {call.get("id"): (call.get("function") or {}).get("name")
            for message in messages if message.get("role") == "assistant"
            for call in message.get("tool_calls") or () if isinstance(call, dict)}


def turn_of(index: int, message: dict, names: dict[str, str]) -> tuple[str, list[dict]]:
    """(Gemini role, parts) of one OpenAI message."""
    role = message.get("role")
    if role not in ROLES:
        raise bad_request(f"messages[{index}].role {role!r} is not one of system, developer, user,"
                          " assistant or tool", f"messages[{index}].role")
    if role == "tool":
        return "user", [function_response(index, message, names)]
    parts = content_parts(index, message.get("content"))
    if role == "assistant":
        parts += [function_call(index, number, call)
                  for number, call in enumerate(message.get("tool_calls") or ())]
    return ROLES[role], parts


def merge_turns(turns: list[tuple[str, list[dict]]]) -> list[dict]:
    """Consecutive turns of the same role merged into one, as Gemini expects alternation."""
    merged: list[dict] = []
    for role, parts in turns:
        if merged and merged[-1]["role"] == role:
            merged[-1]["parts"].extend(parts)
        else:
            merged.append({"role": role, "parts": list(parts)})
    return merged


def content_parts(index: int, content: str | list | None) -> list[dict]:
    """Gemini parts of an OpenAI message content (a string or a list of parts)."""
    if content is None or content == "":
        return []
    if isinstance(content, str):
        return [{"text": content}]
    return [content_part(f"messages[{index}].content[{number}]", part)
            for number, part in enumerate(content)]


def content_part(field: str, part: dict) -> dict:
    kind = part.get("type")
    if kind == "text":
        return {"text": part.get("text") or ""}
    if kind == "image_url":
        return inline_data(f"{field}.image_url", part.get("image_url"))
    if kind == "input_audio":
        return audio_data(f"{field}.input_audio", part.get("input_audio") or {})
    if kind == "file":
        return inline_data(f"{field}.file.file_data", (part.get("file") or {}).get("file_data"))
    raise bad_request(f"{field}: content parts of type {kind!r} are not supported for Gemini models",
                      f"{field}.type")


def inline_data(field: str, source: dict | str | None) -> dict:
    """An inlineData part from a data URL; the gateway fetches no URLs on a client's behalf."""
    url = source.get("url", "") if isinstance(source, dict) else source or ""
    match = _DATA_URL.fullmatch(url)
    if match is None:
        raise bad_request(f"{field} must be a data URL (data:image/png;base64,...); the gateway"
                          " does not fetch URLs", field)
    return {"inlineData": {"mimeType": match[1], "data": match[2]}}


def audio_data(field: str, audio: dict) -> dict:
    if not audio.get("data") or audio.get("format") not in ("wav", "mp3"):
        raise bad_request(f"{field} needs base64 `data` and a `format` of wav or mp3", field)
    return {"inlineData": {"mimeType": f"audio/{audio['format']}", "data": audio["data"]}}


def function_call(index: int, number: int, call: dict) -> dict:
    """An assistant's OpenAI tool call as a `functionCall` part (its JSON arguments decoded)."""
    field = f"messages[{index}].tool_calls[{number}]"
    function = (call.get("function") or {}) if isinstance(call, dict) else {}
    arguments = json_object(function.get("arguments") or "{}")
    if not function.get("name") or arguments is None:
        raise bad_request(f"{field}.function needs a name and arguments that are a JSON object", field)
    return {"functionCall": {"name": function["name"], "args": arguments}}


def function_response(index: int, message: dict, names: dict[str, str]) -> dict:
    """A tool message as a `functionResponse` part, named after the call it answers."""
    name = names.get(message.get("tool_call_id")) or message.get("name")
    if not name:
        raise bad_request(f"messages[{index}].tool_call_id must name a tool call of an earlier"
                          " assistant message", f"messages[{index}].tool_call_id")
    text = "".join(text_pieces(index, message.get("content")))
    result = json_object(text)
    return {"functionResponse": {"name": name, "response": {"content": text} if result is None else result}}


def text_pieces(index: int, content: str | list | None) -> list[str]:
    """The text of a content that may only hold text (system prompts, tool results)."""
    if content is None or isinstance(content, str):
        return [content or ""]
    if any(part.get("type") != "text" for part in content):
        raise bad_request(f"messages[{index}].content may only hold text parts here",
                          f"messages[{index}].content")
    return [part.get("text") or "" for part in content]


def json_object(text: str) -> dict | None:
    try:
        value = loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def generation_config(body: dict) -> dict:
    """The generationConfig of an OpenAI chat body: limits, sampling, stops, output format."""
    config = {name: body[field] for field, name in GENERATION_FIELDS.items() if body.get(field) is not None}
    limits = [body[field] for field in ("max_tokens", "max_completion_tokens") if body.get(field) is not None]
    if limits:
        config["maxOutputTokens"] = min(limits)
    if stops := stop_sequences(body.get("stop")):
        config["stopSequences"] = stops
    config.update(response_format(body.get("response_format")))
    if body.get("reasoning_effort") is not None:
        config["thinkingConfig"] = {"thinkingBudget": thinking_budget(body["reasoning_effort"])}
    return config


def stop_sequences(stop: str | list | None) -> list[str]:
    if stop is None:
        return []
    return [stop] if isinstance(stop, str) else list(stop)


def response_format(fmt: dict | None) -> dict:
    """JSON output as Gemini asks for it: a response MIME type, and the schema if one is given."""
    kind = fmt.get("type") if isinstance(fmt, dict) else fmt
    if kind is None or kind == "text":
        return {}
    if kind == "json_object":
        return {"responseMimeType": "application/json"}
    if kind == "json_schema":
        schema = (fmt.get("json_schema") or {}).get("schema")
        return {"responseMimeType": "application/json", **({"responseJsonSchema": schema} if schema else {})}
    raise bad_request(f"response_format type {kind!r} is not one of text, json_object or json_schema",
                      "response_format")


def thinking_budget(effort: str) -> int:
    if effort not in THINKING_BUDGETS:
        raise bad_request(f"reasoning_effort {effort!r} is not one of {', '.join(THINKING_BUDGETS)}",
                          "reasoning_effort")
    return THINKING_BUDGETS[effort]


def function_of(index: int, tool: dict) -> dict:
    """An OpenAI function tool as a Gemini function declaration (its schema is JSON Schema)."""
    function = (tool.get("function") or {}) if isinstance(tool, dict) else {}
    if not isinstance(tool, dict) or tool.get("type") != "function" or not function.get("name"):
        raise bad_request(f"tools[{index}]: only function tools with a name are supported", f"tools[{index}]")
    declaration = {"name": function["name"]}
    if function.get("description"):
        declaration["description"] = function["description"]
    if function.get("parameters"):
        declaration["parametersJsonSchema"] = function["parameters"]
    return declaration


def tool_config(choice: str | dict) -> dict:
    """OpenAI's tool_choice as Gemini's functionCallingConfig."""
    if isinstance(choice, dict) and (name := (choice.get("function") or {}).get("name")):
        return {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": [name]}}
    if isinstance(choice, str) and choice in TOOL_MODES:
        return {"functionCallingConfig": {"mode": TOOL_MODES[choice]}}
    raise bad_request(f"tool_choice {choice!r} is not one of auto, none, required or a function",
                      "tool_choice")


# -- answers: Gemini -> OpenAI chat ------------------------------------------------------------

def completion_id(request_id: str) -> str:
    return f"chatcmpl-{request_id}"


def refuse_blocked(answer: dict) -> None:
    """A prompt Gemini refused (promptFeedback.blockReason, no candidates) is an error, never
    an empty success."""
    feedback = answer.get("promptFeedback") or {}
    if (reason := feedback.get("blockReason")) and not answer.get("candidates"):
        detail = f": {feedback['blockReasonMessage']}" if feedback.get("blockReasonMessage") else ""
        raise UpstreamError(400, f"google blocked the prompt ({reason}){detail}")


def completion(answer: dict, chat_id: str, model: str, created: int) -> dict:
    """A Gemini GenerateContentResponse as an OpenAI `chat.completion`."""
    refuse_blocked(answer)
    candidates = answer.get("candidates") or []
    if not candidates:
        raise UpstreamError(502, "google returned an answer without candidates")
    choices = [choice_of(chat_id, position, candidate) for position, candidate in enumerate(candidates)]
    return {"id": chat_id, "object": "chat.completion", "created": created, "model": model,
            "choices": choices, "usage": openai_usage(answer.get("usageMetadata"))}


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
    Checked by billing's rule: UpstreamError 502 when it is not sound."""
    count = _counter(metadata)
    return checked_usage(PROVIDER, Usage(count("promptTokenCount") + count("toolUsePromptTokenCount"),
                                         count("candidatesTokenCount") + count("thoughtsTokenCount"),
                                         count("cachedContentTokenCount")))


def openai_usage(metadata: dict | None) -> dict:
    usage = usage_of(metadata)
    return {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
            "total_tokens": usage.total_tokens,
            "prompt_tokens_details": {"cached_tokens": usage.cached_prompt_tokens},
            "completion_tokens_details": {"reasoning_tokens": _counter(metadata)("thoughtsTokenCount")}}


def _counter(metadata: object):
    report = usage_report(PROVIDER, metadata)
    return lambda name: token_count(PROVIDER, report, name)


def stream_error(error: object) -> UpstreamError:
    """The failure an `error` object reports in the middle of a stream."""
    error = error if isinstance(error, dict) else {}
    code = error.get("code") if isinstance(error.get("code"), int) else 502
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


class StreamTranslator:
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
        """The OpenAI chunk of one event; None when it carries no candidate."""
        if "error" in event:
            raise stream_error(event["error"])
        refuse_blocked(event)
        if event.get("usageMetadata"):
            self.reported = event["usageMetadata"]
        choices = [self._choice(position, candidate)
                   for position, candidate in enumerate(event.get("candidates") or ())]
        return {**self.head, "choices": choices} if choices else None

    def usage_chunk(self) -> dict:
        """The final chunk without choices that carries the usage, as OpenAI ends a stream."""
        return {**self.head, "choices": [], "usage": openai_usage(self.reported)}

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
