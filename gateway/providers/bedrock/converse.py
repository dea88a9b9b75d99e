"""OpenAI chat requests as Bedrock Converse requests (the same body serves ConverseStream).

No I/O here. Bad input raises ApiError 400 naming the field. Converse is one shape for every
model Bedrock serves (Claude, Llama, Mistral, Nova): system prompts apart, turns alternating
user and assistant, content as typed blocks, images as bytes, tools as `toolSpec`s. It has no
JSON mode of its own, so `response_format` with a schema becomes a tool the model must call,
whose input is handed back as the answer's text (`RESPONSE_TOOL`). OpenAI's `service_tier`
becomes Converse's `serviceTier` (`service_tier`).
"""

import base64
import binascii
import re
from types import MappingProxyType

from gateway.edge.errors import bad_request
from gateway.jsonio import loads
from gateway.providers.base import Allowance, alternating, answers, limit

RESPONSE_TOOL = "json_response"  # the tool a JSON-schema answer is written through
IMAGE_FORMATS = MappingProxyType({"image/png": "png", "image/jpeg": "jpeg", "image/jpg": "jpeg",
                                  "image/gif": "gif", "image/webp": "webp"})
TOOL_CHOICES: MappingProxyType[str, dict] = MappingProxyType({"auto": {"auto": {}}, "required": {"any": {}}})
STANDARD_TIERS = frozenset({"auto", "default"})  # OpenAI's names for what Bedrock does unasked
BEDROCK_TIERS = frozenset({"flex", "priority", "reserved"})  # the rest of AWS's ServiceTierType
_DATA_URL = re.compile(r"data:([\w.+-]+/[\w.+-]+);base64,(.+)", re.DOTALL)
_EMPTY_SCHEMA = MappingProxyType({"type": "object", "properties": {}})


def converse_body(body: dict) -> dict:
    """The Converse request for an OpenAI chat `body` (the model goes in the URL)."""
    if answers(body, "n") > 1:
        raise bad_request("n must be 1 for Bedrock models: Converse writes one answer", "n")
    system, turns = _split(_objects(body.get("messages"), "messages"))
    request: dict = {"messages": alternating(turns)}  # Converse requires them to alternate
    if system:
        request["system"] = [{"text": text} for text in system]
    if config := inference_config(body):
        request["inferenceConfig"] = config
    if tool_config := _tool_config(body):
        request["toolConfig"] = tool_config
    if tier := service_tier(body.get("service_tier")):
        request["serviceTier"] = {"type": tier}
    return request


def service_tier(tier: object) -> str | None:
    """Bedrock's serviceTier type for an OpenAI `service_tier` (None: Bedrock's default, as for
    "auto" and "default"). A tier Bedrock does not offer is a 400 before any call: sent on, AWS
    would refuse it; dropped, the request would be served at a price the client did not ask for."""
    if tier is None or (isinstance(tier, str) and tier in STANDARD_TIERS):
        return None
    if isinstance(tier, str) and tier in BEDROCK_TIERS:
        return tier
    raise bad_request(f"service_tier {tier!r} is not offered by Bedrock: use auto, default, "
                      + ", ".join(sorted(BEDROCK_TIERS)), "service_tier")


def allowance(body: dict) -> Allowance:
    """What an OpenAI chat body lets a Bedrock model write: its token limit, one answer."""
    return Allowance(limit(*_limits(body)))


def inference_config(body: dict) -> dict:
    config: dict = {}
    if (tokens := limit(*_limits(body))) is not None:
        config["maxTokens"] = tokens
    for ours, theirs in (("temperature", "temperature"), ("top_p", "topP")):
        if body.get(ours) is not None:
            config[theirs] = body[ours]
    stop = body.get("stop")
    if stop:
        config["stopSequences"] = [stop] if isinstance(stop, str) else list(stop)
    return config


def _limits(body: dict) -> list[object]:
    return [body[name] for name in ("max_tokens", "max_completion_tokens") if body.get(name) is not None]


def _objects(value: object, where: str) -> list[dict]:
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise bad_request(f"{where} must be an array of objects", where)
    return value


def _split(messages: list[dict]) -> tuple[list[str], list[tuple[str, list[dict]]]]:
    """System and developer texts apart; the rest as (Converse role, content blocks) turns."""
    system, turns = [], []
    for index, message in enumerate(messages):
        if message.get("role") in ("system", "developer"):
            if text := _text_only(message.get("content"), index):
                system.append(text)
        else:
            turns.append(_turn(index, message))
    return system, turns


def _turn(index: int, message: dict) -> tuple[str, list[dict]]:
    role = message.get("role")
    if role == "user":
        return "user", _blocks(index, message.get("content"))
    if role == "assistant":
        calls = _objects(message.get("tool_calls") or [], "messages")
        return "assistant", _blocks(index, message.get("content")) + [_tool_use(index, call) for call in calls]
    if role == "tool":
        if not message.get("tool_call_id"):
            raise bad_request(f"messages[{index}]: a tool message needs tool_call_id", "messages")
        result = {"toolUseId": message["tool_call_id"],
                  "content": [{"text": _text_only(message.get("content"), index)}]}
        return "user", [{"toolResult": result}]
    raise bad_request(f"messages[{index}]: role {role!r} is not supported for Bedrock models", "messages")


def _blocks(index: int, content: object) -> list[dict]:
    if content is None or content == "":
        return []
    if isinstance(content, str):
        return [{"text": content}]
    return [_part(index, part) for part in _objects(content, "messages")]


def _part(index: int, part: dict) -> dict:
    kind = part.get("type")
    if kind == "text" and isinstance(part.get("text"), str):
        return {"text": part["text"]}
    if kind == "image_url":
        return {"image": _image(index, part.get("image_url"))}
    raise bad_request(f"messages[{index}]: content parts of type {kind!r} are not supported for Bedrock"
                      " models", "messages")


def _image(index: int, image: object) -> dict:
    """A Converse image from a data URL (the gateway fetches no URLs on a client's behalf)."""
    url = image.get("url", "") if isinstance(image, dict) else image
    match = _DATA_URL.fullmatch(url) if isinstance(url, str) else None
    image_format = IMAGE_FORMATS.get(match[1].lower()) if match else None
    if match is None or image_format is None:
        raise bad_request(f"messages[{index}]: image_url must be a data URL of a PNG, JPEG, GIF or WebP"
                          " image; the gateway does not fetch images", "messages")
    try:
        base64.b64decode(match[2], validate=True)
    except (binascii.Error, ValueError):
        raise bad_request(f"messages[{index}]: the image's base64 is not valid", "messages") from None
    return {"format": image_format, "source": {"bytes": match[2]}}  # JSON carries bytes as base64


def _tool_use(index: int, call: dict) -> dict:
    function = _object(call.get("function"))
    try:
        arguments = loads(function.get("arguments") or "{}")
    except (ValueError, TypeError):
        arguments = None
    if not isinstance(arguments, dict) or not function.get("name") or not call.get("id"):
        raise bad_request(f"messages[{index}].tool_calls needs an id, function.name and function.arguments"
                          " holding a JSON object", "messages")
    return {"toolUse": {"toolUseId": call["id"], "name": function["name"], "input": arguments}}


def _object(value: object) -> dict:
    return value if isinstance(value, dict) else {}


def _text_only(content: object, index: int) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    parts = _objects(content, "messages")
    if any(part.get("type") != "text" for part in parts):
        raise bad_request(f"messages[{index}]: only text content is supported here", "messages")
    return "".join(str(part.get("text") or "") for part in parts)


def _tool_config(body: dict) -> dict | None:
    """Converse's toolConfig: the request's function tools, or the JSON-schema answer's tool."""
    if schema := _response_schema(body.get("response_format")):
        tool = {"name": RESPONSE_TOOL, "description": "Answer with this tool's input.", "inputSchema": {"json": schema}}
        return {"tools": [{"toolSpec": tool}], "toolChoice": {"tool": {"name": RESPONSE_TOOL}}}
    if not body.get("tools") or body.get("tool_choice") == "none":
        return None
    config: dict = {"tools": [_tool(index, tool) for index, tool in enumerate(_objects(body["tools"], "tools"))]}
    if (choice := _tool_choice(body.get("tool_choice"))) is not None:
        config["toolChoice"] = choice
    return config


def _tool(index: int, tool: dict) -> dict:
    function = _object(tool.get("function"))
    if tool.get("type") != "function" or not function.get("name"):
        raise bad_request(f"tools[{index}]: only function tools with a name are supported", "tools")
    spec = {"name": function["name"], "inputSchema": {"json": function.get("parameters") or dict(_EMPTY_SCHEMA)}}
    if function.get("description"):
        spec["description"] = function["description"]
    return {"toolSpec": spec}


def _tool_choice(choice: object) -> dict | None:
    if choice is None:
        return None
    function = choice.get("function") if isinstance(choice, dict) else None
    if isinstance(function, dict) and function.get("name"):
        return {"tool": {"name": function["name"]}}
    if isinstance(choice, str) and choice in TOOL_CHOICES:
        return dict(TOOL_CHOICES[choice])
    raise bad_request(f"tool_choice {choice!r} is not one of auto, none, required or a function", "tool_choice")


def _response_schema(response_format: object) -> dict | None:
    """The schema a `json_schema` response_format asks for (None: free text); `json_object`,
    which Converse cannot promise, is any object."""
    if not isinstance(response_format, dict) or response_format.get("type") in (None, "text"):
        return None
    if response_format.get("type") == "json_object":
        return {"type": "object"}
    schema = (response_format.get("json_schema") or {}).get("schema") if response_format.get(
        "type") == "json_schema" else None
    if not isinstance(schema, dict):
        raise bad_request("response_format must be text, json_object, or json_schema with a schema object",
                          "response_format")
    return schema
