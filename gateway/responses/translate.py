"""Pure translations for `POST /v1/responses` on models served through chat completions
(Anthropic, Gemini): the Responses request into an OpenAI chat body, and the chat answer back
into a Responses `response` object. The stream's events are built in `translate_stream`.

No I/O here. What cannot be translated raises ApiError 400 naming the field (`errors.bad_request`).
"""

from collections.abc import Sequence
from types import MappingProxyType

from gateway.edge.errors import bad_request
from gateway.accounts.keys import new_id
from gateway.providers.usage import Usage, openai_tier

ROLES = frozenset({"user", "assistant", "system", "developer"})
TEXT_ONLY_ROLES = frozenset({"assistant", "system", "developer"})  # chat takes images from users only
TEXT_PARTS = MappingProxyType({"input_text": "text", "output_text": "text", "refusal": "refusal"})
TOOL_CHOICES = frozenset({"auto", "none", "required"})
# Same name and meaning in chat (a Bedrock model reads service_tier off the chat body).
PASSED_THROUGH = ("temperature", "top_p", "parallel_tool_calls", "user", "service_tier")
UNTRANSLATABLE = ("prompt", "conversation")  # stored prompts and conversations exist only at OpenAI
# A chat finish_reason that cuts the answer short, and the Responses reason it is reported as.
INCOMPLETE_REASONS = MappingProxyType({"length": "max_output_tokens", "content_filter": "content_filter"})


# -- requests: Responses -> OpenAI chat ----------------------------------------------------------

def chat_body(request: dict, history: Sequence[dict] = ()) -> dict:
    """The OpenAI chat body for a validated Responses `request`; `history` (the input and output
    items of the responses before it, from previous_response_id) goes before its input."""
    for name in UNTRANSLATABLE:
        if request.get(name) is not None:
            raise bad_request(f"{name} is not supported for this model", name)
    messages = instruction_messages(request.get("instructions"))
    for number, item in enumerate(history):
        add_item(messages, item, f"previous_response_id (its item {number})")
    for number, item in enumerate(input_items(request.get("input"), bool(history))):
        add_item(messages, item, f"input[{number}]")
    chat = {"model": request["model"], "messages": messages}
    chat.update({name: request[name] for name in PASSED_THROUGH if request.get(name) is not None})
    if request.get("max_output_tokens") is not None:
        chat["max_tokens"] = request["max_output_tokens"]
    chat.update(tool_fields(request.get("tools"), request.get("tool_choice")))
    chat.update(format_fields(request.get("text")))
    if (effort := (request.get("reasoning") or {}).get("effort")) is not None:
        chat["reasoning_effort"] = effort
    if request.get("stream"):
        chat.update(stream=True, stream_options={"include_usage": True})
    return chat


def param_of(where: str) -> str:
    """The request field a location names ("previous_response_id (its item 2)" is the field)."""
    return where.split(" ")[0]


def instruction_messages(instructions: object) -> list[dict]:
    if instructions is None or instructions == "":
        return []
    if not isinstance(instructions, str):
        raise bad_request("instructions must be a string", "instructions")
    return [{"role": "system", "content": instructions}]


def input_items(value: object, has_history: bool) -> list[dict]:
    """The input as items: a string is one user message."""
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": value}]
    if value is None and has_history:
        return []
    if not isinstance(value, list) or not value:
        raise bad_request("input must be a string or a non-empty array of items", "input")
    return value


def add_item(messages: list[dict], item: object, where: str) -> None:
    """One Responses item appended to the chat messages; a function call joins the assistant
    message just before it, so consecutive calls (and the text before them) are one message."""
    if not isinstance(item, dict):
        raise bad_request(f"{where} must be an object", param_of(where))
    kind = item.get("type") or ("message" if "role" in item else None)
    if kind == "message":
        messages.append(chat_message(item, where))
    elif kind == "function_call":
        add_tool_call(messages, tool_call(item, where))
    elif kind == "function_call_output":
        messages.append(tool_message(item, where))
    elif kind != "reasoning":  # another model's own notes (often encrypted), not for this one
        raise bad_request(f"{where}: items of type {kind!r} are not supported for this model",
                          param_of(f"{where}.type"))


def chat_message(item: dict, where: str) -> dict:
    role, content = item.get("role"), item.get("content")
    if not isinstance(role, str) or role not in ROLES:  # a list or object is unhashable
        raise bad_request(f"{where}.role {role!r} is not one of user, assistant, system or developer",
                          param_of(f"{where}.role"))
    if isinstance(content, str):
        return {"role": role, "content": content}
    if not isinstance(content, list):
        raise bad_request(f"{where}.content must be a string or an array of parts", param_of(f"{where}.content"))
    parts = [content_part(part, f"{where}.content[{number}]") for number, part in enumerate(content)]
    if role in TEXT_ONLY_ROLES:
        return {"role": role, "content": joined_text(parts, f"{where}.content")}
    return {"role": role, "content": parts}


def joined_text(parts: list[dict], where: str) -> str:
    if any(part["type"] != "text" for part in parts):
        raise bad_request(f"{where} may only hold text here for this model", param_of(where))
    return "".join(part["text"] for part in parts)


def content_part(part: object, where: str) -> dict:
    """A Responses content part as a chat one: text (typed in or answered) or an image by URL."""
    kind = part.get("type") if isinstance(part, dict) else None
    if isinstance(part, dict) and isinstance(kind, str) and kind in TEXT_PARTS:
        return {"type": "text", "text": string_field(part, TEXT_PARTS[kind], where)}
    if isinstance(part, dict) and kind == "input_image":
        return image_part(part, where)
    raise bad_request(f"{where}: content parts of type {kind!r} are not supported for this model",
                      param_of(f"{where}.type"))


def image_part(part: dict, where: str) -> dict:
    if part.get("file_id") is not None:
        raise bad_request(f"{where}.file_id: uploaded files are not supported for this model; send"
                          " image_url as a data URL", param_of(f"{where}.file_id"))
    image = {"url": string_field(part, "image_url", where)}
    if isinstance(part.get("detail"), str):
        image["detail"] = part["detail"]
    return {"type": "image_url", "image_url": image}


def string_field(value: dict, name: str, where: str) -> str:
    if not isinstance(value.get(name), str):
        raise bad_request(f"{where}.{name} must be a string", param_of(f"{where}.{name}"))
    return value[name]


def tool_call(item: dict, where: str) -> dict:
    """A function_call item as a chat tool call."""
    call_id, name = string_field(item, "call_id", where), string_field(item, "name", where)
    arguments = item.get("arguments") or "{}"
    if not isinstance(arguments, str):
        raise bad_request(f"{where}.arguments must be a string of JSON", param_of(f"{where}.arguments"))
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def add_tool_call(messages: list[dict], call: dict) -> None:
    if messages and messages[-1]["role"] == "assistant":
        messages[-1].setdefault("tool_calls", []).append(call)
    else:
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})


def tool_message(item: dict, where: str) -> dict:
    """A function_call_output item as a chat tool message (named, for Gemini, when it says so)."""
    output = item.get("output")
    if isinstance(output, list):
        parts = [content_part(part, f"{where}.output[{number}]") for number, part in enumerate(output)]
        output = joined_text(parts, f"{where}.output")
    elif not isinstance(output, str):
        raise bad_request(f"{where}.output must be a string or an array of parts", param_of(f"{where}.output"))
    message = {"role": "tool", "tool_call_id": string_field(item, "call_id", where), "content": output}
    return {**message, "name": item["name"]} if isinstance(item.get("name"), str) else message


def tool_fields(tools: object, choice: object) -> dict:
    """The chat `tools` and `tool_choice` for the Responses ones."""
    fields: dict = {}
    if tools:
        if not isinstance(tools, list):
            raise bad_request("tools must be an array", "tools")
        fields["tools"] = [function_tool(tool, f"tools[{number}]") for number, tool in enumerate(tools)]
    if choice is not None:
        fields["tool_choice"] = chat_tool_choice(choice)
    return fields


def function_tool(tool: object, where: str) -> dict:
    """A Responses function tool (flat) as a chat one (nested); hosted tools exist only at OpenAI."""
    kind = tool.get("type") if isinstance(tool, dict) else None
    if not isinstance(tool, dict) or kind != "function":
        raise bad_request(f"{where}: tools of type {kind!r} are not supported for this model; only"
                          " function tools are", f"{where}.type")
    function = {"name": string_field(tool, "name", where)}
    function.update({name: tool[name] for name in ("description", "parameters", "strict")
                     if tool.get(name) is not None})
    return {"type": "function", "function": function}


def chat_tool_choice(choice: object) -> str | dict:
    if isinstance(choice, str) and choice in TOOL_CHOICES:
        return choice
    if isinstance(choice, dict) and choice.get("type") == "function" and isinstance(choice.get("name"), str):
        return {"type": "function", "function": {"name": choice["name"]}}
    raise bad_request("tool_choice must be auto, none, required or {type: function, name} for this model",
                      "tool_choice")


def format_fields(text: object) -> dict:
    """The chat `response_format` for `text.format`: plain text needs none."""
    fmt = text.get("format") if isinstance(text, dict) else None
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    if fmt is None or kind == "text":
        return {}
    if kind == "json_object":
        return {"response_format": {"type": "json_object"}}
    if kind == "json_schema" and isinstance(fmt, dict):
        schema = {name: fmt[name] for name in ("name", "description", "schema", "strict")
                  if fmt.get(name) is not None}
        return {"response_format": {"type": "json_schema", "json_schema": schema}}
    raise bad_request(f"text.format.type {kind!r} is not one of text, json_object or json_schema",
                      "text.format.type")


# -- answers: OpenAI chat -> Responses -----------------------------------------------------------

def usage_object(usage: Usage) -> dict:
    """Billing's usage in the Responses API's terms (the chat adapters report no reasoning apart)."""
    return {"input_tokens": usage.prompt_tokens,
            "input_tokens_details": {"cached_tokens": usage.cached_prompt_tokens,  # writes: of either lifetime
                                     "cache_write_tokens": usage.cache_write_tokens + usage.cache_write_1h_tokens},
            "output_tokens": usage.completion_tokens, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": usage.total_tokens}


def response_object(reply: dict, usage: Usage, *, response_id: str, model: str, created_at: int,
                    request: dict) -> dict:
    """A chat completion body as the Responses `response` object answering `request`."""
    choice = (reply.get("choices") or [{}])[0]
    message, finish_reason = choice.get("message") or {}, choice.get("finish_reason")
    items = [message_item(new_id("msg"), message["content"])] if message.get("content") else []
    items += [function_call_item(new_id("fc"), call) for call in message.get("tool_calls") or ()]
    if items and finish_reason in INCOMPLETE_REASONS:
        items[-1]["status"] = "incomplete"  # the item being written when the answer was cut
    return response_resource(request, response_id=response_id, model=model, created_at=created_at,
                             output=items, usage=usage, finish_reason=finish_reason)


def message_item(item_id: str, text: str | None, status: str = "completed") -> dict:
    """An assistant message item; `text` None while its text part is not yet added (streaming)."""
    content = [] if text is None else [output_text_part(text)]
    return {"id": item_id, "type": "message", "role": "assistant", "status": status, "content": content}


def output_text_part(text: str) -> dict:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def function_call_item(item_id: str, call: dict, status: str = "completed") -> dict:
    """A chat tool call as a function_call output item."""
    function = call.get("function") or {}
    return {"id": item_id, "type": "function_call", "status": status, "call_id": call.get("id") or "",
            "name": function.get("name") or "", "arguments": function.get("arguments") or ""}


def response_resource(request: dict, *, response_id: str, model: str, created_at: int, output: list[dict],
                      usage: Usage | None, finish_reason: str | None) -> dict:
    """The `response` object: in progress while `usage` is None, then completed or incomplete."""
    reason = INCOMPLETE_REASONS.get(finish_reason or "stop")
    status = "in_progress" if usage is None else "incomplete" if reason else "completed"
    return {"id": response_id, "object": "response", "created_at": created_at, "status": status,
            "error": None, "incomplete_details": {"reason": reason} if status == "incomplete" else None,
            "model": model, "output": output, "usage": None if usage is None else usage_object(usage),
            "service_tier": None if usage is None else openai_tier(usage.service_tier), **echoed_fields(request)}


def echoed_fields(request: dict) -> dict:
    """The request's settings as the response repeats them, the API's defaults where unset."""
    def given(name: str, default: object = None) -> object:
        return request[name] if request.get(name) is not None else default
    reasoning = request.get("reasoning") or {}
    return {"instructions": given("instructions"), "max_output_tokens": given("max_output_tokens"),
            "metadata": given("metadata", {}), "parallel_tool_calls": given("parallel_tool_calls", True),
            "previous_response_id": given("previous_response_id"),
            "reasoning": {"effort": reasoning.get("effort"), "summary": reasoning.get("summary")},
            "store": given("store", True), "temperature": given("temperature", 1.0),
            "text": given("text", {"format": {"type": "text"}}), "tool_choice": given("tool_choice", "auto"),
            "tools": given("tools", []), "top_p": given("top_p", 1.0), "truncation": given("truncation", "disabled"),
            "user": given("user")}
