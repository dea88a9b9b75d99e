"""Pure translation for the google adapter's chat requests: an OpenAI chat request into a
Gemini `generateContent` request (the answers come back through `chat`).

Gemini knows two roles, `user` and `model`: system and developer messages become
`systemInstruction`, tool results are user turns of `functionResponse` parts, and consecutive
turns of one role are merged. No I/O here. Bad input raises ApiError 400 naming the field
(`errors.bad_request`).
"""

import re
from types import MappingProxyType

from gateway.edge.errors import bad_request
from gateway.jsonio import loads
from gateway.providers.base import Allowance, answers, limit

ROLES = MappingProxyType({"user": "user", "assistant": "model", "tool": "user"})
SYSTEM_ROLES = frozenset({"system", "developer"})
# OpenAI request fields with a generationConfig counterpart, and that counterpart's name (the
# limits on the answer apart: `limits`).
GENERATION_FIELDS = MappingProxyType({
    "temperature": "temperature", "top_p": "topP", "top_k": "topK",
    "seed": "seed", "presence_penalty": "presencePenalty", "frequency_penalty": "frequencyPenalty"})
TOOL_MODES = MappingProxyType({"auto": "AUTO", "none": "NONE", "required": "ANY"})
# reasoning_effort as a thinking budget, the values Google's own OpenAI endpoint uses.
THINKING_BUDGETS = MappingProxyType({"none": 0, "minimal": 1024, "low": 1024, "medium": 8192,
                                     "high": 24576})
_DATA_URL = re.compile(r"data:([\w.+-]+/[\w.+-]+);base64,(.+)", re.DOTALL)


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


def tool_names(messages: list[dict]) -> dict[str | None, str | None]:
    """Tool call id -> function name: Gemini answers a function by name, OpenAI by call id
    (either may be missing from a call)."""
    return {call.get("id"): (call.get("function") or {}).get("name")
            for message in messages if message.get("role") == "assistant"
            for call in message.get("tool_calls") or () if isinstance(call, dict)}


def turn_of(index: int, message: dict, names: dict[str | None, str | None]) -> tuple[str, list[dict]]:
    """(Gemini role, parts) of one OpenAI message."""
    role = message.get("role")
    if not isinstance(role, str) or role not in ROLES:
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


def function_response(index: int, message: dict, names: dict[str | None, str | None]) -> dict:
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
    config.update(limits(body))
    if stops := stop_sequences(body.get("stop")):
        config["stopSequences"] = stops
    config.update(response_format(body.get("response_format")))
    if body.get("reasoning_effort") is not None:
        config["thinkingConfig"] = {"thinkingBudget": thinking_budget(body["reasoning_effort"])}
    return config


def limits(body: dict) -> dict:
    """The generationConfig fields that bound the answer: maxOutputTokens, the tighter of
    max_tokens and max_completion_tokens (thinking included), and candidateCount, `n`."""
    given = [body[field] for field in ("max_tokens", "max_completion_tokens") if body.get(field) is not None]
    fields = {"maxOutputTokens": min(given)} if given else {}
    return fields | ({"candidateCount": body["n"]} if body.get("n") is not None else {})


def allowance(config: dict) -> Allowance:
    """What a generationConfig lets Gemini write: maxOutputTokens in each of candidateCount answers."""
    return Allowance(limit(config.get("maxOutputTokens")), answers(config, "candidateCount"))


def stop_sequences(stop: str | list | None) -> list[str]:
    if stop is None:
        return []
    return [stop] if isinstance(stop, str) else list(stop)


def response_format(fmt: dict | None) -> dict:
    """JSON output as Gemini asks for it: a response MIME type, and the schema if one is given."""
    fmt = fmt or {}
    kind = fmt.get("type")
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
