"""Bedrock's answers as the gateway's: a Converse answer as an OpenAI `chat.completion`, its
usage as billing counts it, and AWS's errors as UpstreamErrors with the gateway's statuses.

No I/O here but reading an error answer. Bedrock reports `inputTokens` without the cached
tokens: cache reads and writes are counted apart (`cacheReadInputTokens`,
`cacheWriteInputTokens`, the writes of each lifetime in `cacheDetails`) and are added back into
the prompt, where billing expects them. The tier served is the answer's `serviceTier.type`
(a stream's is in its `metadata` event).
"""

from types import MappingProxyType

import aiohttp
import msgspec

from gateway.edge.errors import UpstreamError
from gateway.jsonio import encode, loads
from gateway.providers.bedrock.converse import RESPONSE_TOOL
from gateway.providers.http import error_text, scrubbed
from gateway.providers.shapes import conforming
from gateway.providers.usage import Usage, checked_usage, five_minute_writes, invalid_usage, openai_tier, served_tier, \
    token_count, usage_report

PROVIDER = "bedrock"
CACHE_LIFETIMES = frozenset({"5m", "1h"})  # the TTLs of AWS's CacheDetail
FINISH_REASONS = MappingProxyType({
    "end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls",
    "content_filtered": "content_filter", "guardrail_intervened": "content_filter",
    "model_context_window_exceeded": "length"})
# AWS's error names (the `x-amzn-ErrorType` header, a stream's `:exception-type`, case aside) as
# the gateway's statuses: busy or down fails over (429, 5xx, 504), a refused request does not.
ERROR_STATUS = MappingProxyType({
    "throttlingexception": 429, "servicequotaexceededexception": 429, "serviceunavailableexception": 503,
    "modelnotreadyexception": 503, "modeltimeoutexception": 504, "internalserverexception": 500,
    "modelerrorexception": 502, "modelstreamerrorexception": 502, "validationexception": 400,
    "accessdeniedexception": 403, "resourcenotfoundexception": 404, "unrecognizedclientexception": 401,
    "invalidsignatureexception": 401, "expiredtokenexception": 401, "incompletesignatureexception": 401,
    "missingauthenticationtokenexception": 401})


class _Block(msgspec.Struct, rename="camel"):
    text: str | None = None
    tool_use: dict | None = None


class _Message(msgspec.Struct):
    content: list[_Block]


class _Output(msgspec.Struct):
    message: _Message


class ConverseAnswer(msgspec.Struct, rename="camel"):
    """The parts of a Converse answer the gateway reads, typed: anything else is a broken answer."""

    output: _Output
    stop_reason: str


def usage_of(usage: object, tier: object = None) -> Usage:
    """Bedrock's usage with the cache reads and writes counted in the prompt, the writes split by
    lifetime (`cacheDetails`), and the tier its `serviceTier` says it served; checked."""
    report = usage_report(PROVIDER, usage)
    read = token_count(PROVIDER, report, "cacheReadInputTokens")
    written = token_count(PROVIDER, report, "cacheWriteInputTokens")
    one_hour = one_hour_writes(report.get("cacheDetails"))
    prompt = token_count(PROVIDER, report, "inputTokens") + read + written
    served = served_tier(PROVIDER, usage_report(PROVIDER, tier, "serviceTier").get("type"))
    return checked_usage(PROVIDER, Usage(prompt, token_count(PROVIDER, report, "outputTokens"), read,
                                         five_minute_writes(PROVIDER, written, one_hour), one_hour, served))


def one_hour_writes(details: object) -> int:
    """The one-hour part of cacheWriteInputTokens, from `cacheDetails` (absent: none; the rest
    are five-minute writes). A lifetime other than AWS's two ("5m", "1h") is an invalid report:
    it could not be priced as either."""
    if details is None:
        return 0
    if not isinstance(details, list):
        raise invalid_usage(PROVIDER, "cacheDetails is not an array")
    one_hour = 0
    for detail in details:
        entry = usage_report(PROVIDER, detail, "a cacheDetails entry")
        written, ttl = token_count(PROVIDER, entry, "inputTokens"), entry.get("ttl")
        if not isinstance(ttl, str) or ttl not in CACHE_LIFETIMES:
            raise invalid_usage(PROVIDER, f"cacheDetails names the lifetime {repr(ttl)[:20]}")
        one_hour += written if ttl == "1h" else 0
    return one_hour


def openai_usage(usage: Usage) -> dict:
    return {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
            "total_tokens": usage.total_tokens,
            "prompt_tokens_details": {"cached_tokens": usage.cached_prompt_tokens}}


def finish_reason(stop_reason: str | None, answered_as_json: bool = False) -> str:
    if answered_as_json and stop_reason == "tool_use":
        return "stop"  # the JSON answer's tool is how the answer was written, not a call to make
    return FINISH_REASONS.get(stop_reason or "", "stop")


def completion(answer: dict, completion_id: str, model: str, created: int) -> tuple[dict, Usage]:
    """A Converse answer as an OpenAI `chat.completion`, and its usage (checked: UpstreamError 502)."""
    typed = conforming(PROVIDER, answer, ConverseAnswer, "Converse answer")
    usage = usage_of(answer.get("usage"), answer.get("serviceTier"))
    text = "".join(block.text or "" for block in typed.output.message.content)
    uses = [block.tool_use for block in typed.output.message.content if block.tool_use is not None]
    as_json = [use for use in uses if use.get("name") == RESPONSE_TOOL]
    if as_json:
        text, uses = encode(as_json[0].get("input") or {}).decode(), []
    reply: dict = {"role": "assistant", "content": text if text or not uses else None}
    if uses:
        reply["tool_calls"] = [tool_call(use) for use in uses]
    choice = {"index": 0, "message": reply, "logprobs": None,
              "finish_reason": finish_reason(typed.stop_reason, bool(as_json))}
    return {"id": completion_id, "object": "chat.completion", "created": created, "model": model,
            "choices": [choice], "service_tier": openai_tier(usage.service_tier), "usage": openai_usage(usage)}, usage


def tool_call(use: dict) -> dict:
    return {"id": str(use.get("toolUseId") or ""), "type": "function",
            "function": {"name": str(use.get("name") or ""), "arguments": encode(use.get("input") or {}).decode()}}


def error(name: str, message: str, retry_after: str | None = None) -> UpstreamError:
    """AWS's error `name` (e.g. ThrottlingException) as an UpstreamError with the gateway's status."""
    status = ERROR_STATUS.get(name.lower(), 502)
    shown = name[:1].upper() + name[1:]  # a stream's exception types start lower-case
    return UpstreamError(status, f"bedrock returned {shown}: {message}", retry_after)  # cut short by scrubbed


async def refused(provider: str, response: aiohttp.ClientResponse) -> UpstreamError:
    """An AWS error answer (REST-JSON: `x-amzn-ErrorType`, a body with `message`), read and scrubbed."""
    text = await error_text(response)
    name = response.headers.get("x-amzn-ErrorType", "").split(":", 1)[0] or f"HTTP {response.status}"
    failure = error(name, _message(text) or response.reason or "no message", response.headers.get("Retry-After"))
    if name.startswith("HTTP"):
        failure = UpstreamError(response.status, failure.message, failure.retry_after)
    return scrubbed(failure, response)


def _message(text: str) -> str:
    try:
        body = loads(text)
    except ValueError:
        return text.strip()
    return str(body.get("message") or body.get("Message") or "") if isinstance(body, dict) else ""
