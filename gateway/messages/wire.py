"""Pure translations for `POST /v1/messages` on models of OpenAI-shaped providers: the client's
Anthropic request into an OpenAI chat body, and the OpenAI answer (whole, or chunk by chunk)
back into Anthropic's message and event shapes.

No I/O here. Bad input raises ApiError 400 naming the field (`errors.bad_request`).
"""

from types import MappingProxyType

from gateway.providers.usage import Usage
from gateway.edge.errors import bad_request
from gateway.jsonio import encode, loads
from gateway.providers.anthropic.wire import MessageEvent, delta_tokens, objects
from gateway.edge.sse import event_frame

STOP_REASONS = MappingProxyType({"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use",
                                 "function_call": "tool_use", "content_filter": "refusal"})
TOOL_CHOICES = MappingProxyType({"auto": "auto", "any": "required", "none": "none"})
PASSED_THROUGH = ("temperature", "top_p")  # same name and meaning in both APIs


# -- requests: Anthropic Messages -> OpenAI chat -----------------------------------------------

def chat_body(body: dict) -> dict:
    """The OpenAI chat request for an Anthropic Messages `body` (top_k has no counterpart)."""
    messages = system_messages(body.get("system"))
    for index, message in enumerate(body["messages"]):
        messages += openai_messages(index, message)
    chat = {"model": body["model"], "messages": messages, "max_tokens": body["max_tokens"]}
    chat.update({name: body[name] for name in PASSED_THROUGH if body.get(name) is not None})
    if body.get("stop_sequences"):
        chat["stop"] = list(body["stop_sequences"])
    if body.get("tools"):
        chat["tools"] = [function_tool(index, tool) for index, tool in enumerate(objects(body["tools"], "tools"))]
        chat.update(tool_choice_of(body.get("tool_choice")))
    if user := (body.get("metadata") or {}).get("user_id"):
        chat["user"] = user
    return chat


def system_messages(system: str | list | None) -> list[dict]:
    if not system:
        return []
    text = system if isinstance(system, str) else "\n\n".join(text_of(system, "system"))
    return [{"role": "system", "content": text}]


def text_of(blocks: list[dict], where: str) -> list[str]:
    """The texts of blocks that may only be text (system prompt, tool results)."""
    param = where.split("[")[0]
    if any(block.get("type") != "text" for block in objects(blocks, where, param)):
        raise bad_request(f"{where}: only text blocks are supported here for this model", param)
    return [block.get("text") or "" for block in blocks]


def openai_messages(index: int, message: dict) -> list[dict]:
    """One Anthropic turn as OpenAI messages: a user turn's tool results become tool messages."""
    role, content = message["role"], message["content"]
    if isinstance(content, str):
        return [{"role": role, "content": content}]
    if role == "assistant":
        return [assistant_message(index, content)]
    results = [tool_message(index, block) for block in content if block.get("type") == "tool_result"]
    parts = [user_part(index, block) for block in content if block.get("type") != "tool_result"]
    return results + ([{"role": "user", "content": parts}] if parts else [])


def assistant_message(index: int, blocks: list[dict]) -> dict:
    texts, calls = [], []
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            texts.append(block.get("text") or "")
        elif kind == "tool_use":
            arguments = encode(block.get("input") or {}).decode()
            calls.append({"id": block.get("id"), "type": "function",
                          "function": {"name": block.get("name"), "arguments": arguments}})
        elif kind not in ("thinking", "redacted_thinking"):  # the model's own notes, not for others
            raise bad_request(f"messages[{index}]: {kind!r} blocks are not supported for this model", "messages")
    message = {"role": "assistant", "content": "".join(texts) or None}
    return {**message, "tool_calls": calls} if calls else message


def tool_message(index: int, block: dict) -> dict:
    content = block.get("content") or ""
    text = content if isinstance(content, str) else "".join(text_of(content, f"messages[{index}]"))
    return {"role": "tool", "tool_call_id": block.get("tool_use_id"), "content": text}


def user_part(index: int, block: dict) -> dict:
    kind = block.get("type")
    if kind == "text":
        return {"type": "text", "text": block.get("text") or ""}
    source = block.get("source") or {}
    if kind == "image" and source.get("type") == "base64":
        url = f"data:{source.get('media_type')};base64,{source.get('data')}"
        return {"type": "image_url", "image_url": {"url": url}}
    if kind == "image" and source.get("type") == "url":
        return {"type": "image_url", "image_url": {"url": source.get("url")}}
    raise bad_request(f"messages[{index}]: {kind!r} blocks are not supported for this model", "messages")


def function_tool(index: int, tool: dict) -> dict:
    """An Anthropic client tool as an OpenAI function tool; server tools exist only at Anthropic."""
    if tool.get("type") not in (None, "custom") or not tool.get("name"):
        raise bad_request(f"tools[{index}]: only client tools with a name and input_schema are supported"
                          " for this model", "tools")
    function = {"name": tool["name"], "parameters": tool.get("input_schema") or {"type": "object"}}
    if tool.get("description"):
        function["description"] = tool["description"]
    return {"type": "function", "function": function}


def tool_choice_of(choice: dict | None) -> dict:
    """The OpenAI `tool_choice` and `parallel_tool_calls` fields for an Anthropic tool_choice."""
    if not choice:
        return {}
    kind = choice.get("type") if isinstance(choice, dict) else None
    if kind == "tool":
        fields: dict = {"tool_choice": {"type": "function", "function": {"name": choice.get("name")}}}
    elif isinstance(kind, str) and kind in TOOL_CHOICES:
        fields = {"tool_choice": TOOL_CHOICES[kind]}
    else:
        raise bad_request(f"tool_choice type {kind!r} is not one of auto, any, tool or none", "tool_choice")
    return {**fields, "parallel_tool_calls": False} if choice.get("disable_parallel_tool_use") else fields


# -- answers: OpenAI chat -> Anthropic Messages ------------------------------------------------

def anthropic_usage(usage: Usage) -> dict:
    """Billing's usage in Anthropic's terms: cached prompt tokens are reported apart, the cache
    writes as a total and by lifetime (`cache_creation`), with the tier served."""
    written = usage.cache_write_tokens + usage.cache_write_1h_tokens
    return {"input_tokens": usage.prompt_tokens - usage.cached_prompt_tokens - written,
            "cache_creation_input_tokens": written, "cache_read_input_tokens": usage.cached_prompt_tokens,
            "cache_creation": {"ephemeral_5m_input_tokens": usage.cache_write_tokens,
                               "ephemeral_1h_input_tokens": usage.cache_write_1h_tokens},
            "output_tokens": usage.completion_tokens, "service_tier": usage.service_tier or "standard"}


def stop_reason(finish_reason: str | None) -> str:
    return STOP_REASONS.get(finish_reason or "stop", "end_turn")


def message(completion: dict, usage: Usage) -> dict:
    """An OpenAI `chat.completion` as an Anthropic `message`."""
    choice = (completion.get("choices") or [{}])[0]
    reply = choice.get("message") or {}
    content = [{"type": "text", "text": reply["content"]}] if reply.get("content") else []
    content += [tool_use(call) for call in reply.get("tool_calls") or ()]
    return {"id": completion.get("id"), "type": "message", "role": "assistant",
            "model": completion.get("model"), "content": content,
            "stop_reason": stop_reason(choice.get("finish_reason")), "stop_sequence": None,
            "usage": anthropic_usage(usage)}


def tool_use(call: dict) -> dict:
    function = call.get("function") or {}
    return {"type": "tool_use", "id": call.get("id"), "name": function.get("name"),
            "input": arguments_of(function.get("arguments"))}


def arguments_of(arguments: str | None) -> dict:
    """A tool call's JSON arguments as an object; a model's malformed JSON is kept under `_raw`."""
    try:
        value = loads(arguments or "{}")
    except ValueError:
        value = None
    return value if isinstance(value, dict) else {"_raw": arguments}


def message_text(message: dict) -> str:
    return "".join(block.get("text") or "" for block in message.get("content") or () if block.get("type") == "text")


def message_event(name: str, data: dict, usage: Usage | None = None) -> MessageEvent:
    return MessageEvent(name, event_frame(name, encode(data)), data, usage, delta_tokens(data))


class MessagesEventEncoder:
    """OpenAI chunks in, Anthropic stream events out, as they arrive.

    The first chunk opens the message; content opens a text block, each new tool call a
    tool_use block (a block is closed when the next one opens); `finish` closes the last block
    and ends the message with the stop reason and the usage.
    """

    def __init__(self, model: str) -> None:
        self.model, self.started, self.stop = model, False, "end_turn"
        self.open: str | None = None  # "text" or "tool": the kind of the open block
        self.blocks = 0  # content blocks opened so far; the open one is the last
        self.tool_blocks: dict[int, int] = {}  # OpenAI tool call index -> block index

    def feed(self, chunk: dict) -> list[MessageEvent]:
        events = [] if self.started else [self._start(chunk)]
        for choice in chunk.get("choices") or ():
            events += self._delta(choice.get("delta") or {})
            if choice.get("finish_reason"):
                self.stop = stop_reason(choice["finish_reason"])
        return events

    def finish(self, usage: Usage | None) -> list[MessageEvent]:
        """The closing events; `usage` is None when the provider never reported it."""
        events = self._close() if self.started else [self._start({}), *self._close()]
        delta = {"type": "message_delta", "delta": {"stop_reason": self.stop, "stop_sequence": None},
                 "usage": anthropic_usage(usage or Usage())}
        return [*events, message_event("message_delta", delta, usage),
                message_event("message_stop", {"type": "message_stop"})]

    def _start(self, chunk: dict) -> MessageEvent:
        self.started = True
        shell: dict[str, object] = {"id": chunk.get("id") or "", "type": "message", "role": "assistant",
                                    "model": chunk.get("model") or self.model, "content": [], "stop_reason": None,
                                    "stop_sequence": None, "usage": {"input_tokens": 0, "output_tokens": 0}}
        return message_event("message_start", {"type": "message_start", "message": shell})

    def _delta(self, delta: dict) -> list[MessageEvent]:
        events = []
        if delta.get("content"):
            if self.open != "text":
                events += self._open("text", {"type": "text", "text": ""})
            events.append(self._block_delta({"type": "text_delta", "text": delta["content"]}))
        for call in delta.get("tool_calls") or ():
            events += self._tool_delta(call)
        return events

    def _tool_delta(self, call: dict) -> list[MessageEvent]:
        function, position = call.get("function") or {}, call.get("index", 0)
        events = []
        if position not in self.tool_blocks:
            block: dict[str, object] = {"type": "tool_use", "id": call.get("id"), "name": function.get("name"),
                                        "input": {}}
            events += self._open("tool", block)
            self.tool_blocks[position] = self.blocks - 1
        if function.get("arguments"):
            delta = {"type": "input_json_delta", "partial_json": function["arguments"]}
            events.append(self._block_delta(delta, self.tool_blocks[position]))
        return events

    def _open(self, kind: str, block: dict) -> list[MessageEvent]:
        events = self._close()
        self.open, self.blocks = kind, self.blocks + 1
        start = {"type": "content_block_start", "index": self.blocks - 1, "content_block": block}
        return [*events, message_event("content_block_start", start)]

    def _close(self) -> list[MessageEvent]:
        if self.open is None:
            return []
        self.open = None
        return [message_event("content_block_stop", {"type": "content_block_stop", "index": self.blocks - 1})]

    def _block_delta(self, delta: dict, index: int | None = None) -> MessageEvent:
        data = {"type": "content_block_delta", "index": self.blocks - 1 if index is None else index, "delta": delta}
        return message_event("content_block_delta", data)
