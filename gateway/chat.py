"""Chat completions: validate, pick the provider, call it once, bill the usage, relay."""

import math

from aiohttp import web

from gateway import sse
from gateway.billing import Cost, Usage, token_cost, usage_body
from gateway.catalogue import Resolved, UnknownModel
from gateway.charges import Outcome, admit, record, record_failure
from gateway.chat_request import ChatRequest
from gateway.errors import ApiError, UpstreamError, bad_request
from gateway.jsonio import encode
from gateway.providers.base import ChatCall, ChatStream
from gateway.relay import BilledRelay
from gateway.services import Caller, Services

ROUTE = "/v1/chat/completions"


def resolve_chat_model(services: Services, model: str) -> Resolved:
    """The catalogue entry for a chat model; 400 for anything else."""
    try:
        resolved = services.catalogue.resolve(model)
    except UnknownModel:
        raise bad_request(f"unknown model {model!r}; GET /v1/models lists the models", "model") from None
    if resolved.kind != "chat":
        hint = " use POST /v1/music" if resolved.kind == "music" else ""
        raise bad_request(f"model {model!r} is a {resolved.kind} model, not a chat model;{hint}", "model")
    provider = services.providers.get(resolved.provider_id)
    if provider is None or "chat" not in provider.capabilities:
        raise ApiError(501, f"provider {resolved.provider_id!r} of model {model!r} is not available"
                            " in this gateway yet", type="not_implemented")
    return resolved


def require_max_tokens(services: Services, model: Resolved, request: ChatRequest) -> None:
    """400 before any upstream call when the model's provider demands a token limit (spec 7)."""
    if services.providers[model.provider_id].requires_max_tokens and \
            request.max_tokens is None and request.max_completion_tokens is None:
        raise bad_request(f"max_tokens is required for model {request.model!r}: its provider"
                          f" ({model.provider_id}) refuses requests without it", "max_tokens")


def prompt_text(request: ChatRequest) -> list[dict]:
    """The conversation as retained in the content store."""
    return [{"role": m.role, "content": m.content} for m in request.messages]


def estimate_prompt_tokens(request: ChatRequest) -> int:
    """Used only when upstream never reported usage: about four characters a token."""
    chars = sum(len(m.content) if isinstance(m.content, str) else len(encode(m.content or ""))
                for m in request.messages)
    return math.ceil(chars / 4)


async def complete(services: Services, caller: Caller, body: dict, request: ChatRequest) -> dict:
    """A non-streamed completion, billed before it is returned."""
    model = resolve_chat_model(services, request.model)
    require_max_tokens(services, model, request)
    api_key = await admit(services, caller, model.provider_id)
    call = ChatCall(caller.request_id, model.upstream_model, body, api_key)
    try:
        reply = await services.providers[model.provider_id].chat(call)
    except UpstreamError as exc:
        await record_failure(services, caller, ROUTE, model, exc, stream=request.stream)
        raise exc.to_api_error(model.provider_id, request.model) from None
    cost = chat_cost(services, model, reply.usage)
    answer = [c.get("message", {}).get("content") for c in reply.body.get("choices") or ()]
    await record(services, caller, _outcome(model, request, 200, reply.usage, cost, byok=bool(api_key)),
                 {"request": prompt_text(request), "response": answer})
    reply.body["usage"] = {**(reply.body.get("usage") or {}), **usage_body(reply.usage, cost)}
    return reply.body


async def open_stream(services: Services, caller: Caller, body: dict, request: ChatRequest) -> "StreamRelay":
    """Start a streamed completion; errors before the first chunk are ordinary error responses."""
    model = resolve_chat_model(services, request.model)
    require_max_tokens(services, model, request)
    api_key = await admit(services, caller, model.provider_id)
    call = ChatCall(caller.request_id, model.upstream_model, body, api_key)
    try:
        upstream = await services.providers[model.provider_id].open_chat_stream(call)
    except UpstreamError as exc:
        await record_failure(services, caller, ROUTE, model, exc, stream=request.stream)
        raise exc.to_api_error(model.provider_id, request.model) from None
    return StreamRelay(services, caller, request, model, upstream, byok=bool(api_key))


class StreamRelay(BilledRelay):
    """Relays upstream chunks to the client one by one, then bills and sends the usage.

    Billing rule: a completed stream is billed on the usage upstream reports. A client that
    disconnects is billed for what it was sent: the completion tokens delivered so far (one per
    content delta) plus the prompt, and the upstream request is cancelled. A stream the
    provider breaks off is not charged.
    """

    route = ROUTE

    def __init__(self, services: Services, caller: Caller, request: ChatRequest,
                 model: Resolved, upstream: ChatStream, byok: bool = False) -> None:
        self.services, self.caller, self.request = services, caller, request
        self.model, self.upstream, self.byok = model, upstream, byok
        self.delivered, self.usage, self.text = 0, None, []
        self.usage_chunk: dict | None = None

    def _usage_unreported(self) -> bool:
        return self.usage is None

    async def _relay(self, response: web.StreamResponse) -> None:
        async for chunk in self.upstream:
            if chunk.usage is not None:
                self.usage, self.usage_chunk = chunk.usage, chunk.parsed
                continue
            await response.write(sse.frame(chunk.data))
            self.delivered += chunk.tokens
            self.text.extend((c.get("delta") or {}).get("content") or "" for c in chunk.parsed.get("choices") or ())

    async def _bill(self, status: int, *, estimated: bool) -> dict:
        usage = self.usage if not estimated else Usage(estimate_prompt_tokens(self.request), self.delivered)
        cost = chat_cost(self.services, self.model, usage)
        outcome = _outcome(self.model, self.request, status, usage, cost, stream=True, byok=self.byok)
        await record(self.services, self.caller, outcome,
                     {"request": prompt_text(self.request), "response": ["".join(self.text)]})
        return usage_body(usage, cost)

    async def _finish(self, response: web.StreamResponse, usage: dict) -> None:
        options = self.request.stream_options
        if options and options.include_usage:
            chunk = {**(self.usage_chunk or {"object": "chat.completion.chunk", "choices": []}), "usage": usage}
            await response.write(sse.frame(encode(chunk)))
        await response.write(sse.DONE)
        await response.write_eof()

    def _error_frames(self, error: ApiError) -> bytes:
        return sse.frame(encode(error.body())) + sse.DONE


def chat_cost(services: Services, model: Resolved, usage: Usage) -> Cost:
    """What `usage` costs on `model`; prompt tokens read from (written to) the provider's cache
    cost its cache-read (cache-write) price. A catalogue row without one ("0") bills them at the
    prompt price.
    """
    prices = model.prices
    return token_cost(usage, prices.prompt, prices.completion, services.config.billing.usd_to_inr,
                      prices.input_cache_read or None, prices.input_cache_write or None)


def _outcome(model: Resolved, request: ChatRequest, status: int, usage: Usage, cost, *,
             stream: bool = False, byok: bool = False, error: str = "") -> Outcome:
    """Delivered requests are charged, unless the org paid the provider with its own key."""
    return Outcome(route=ROUTE, model=model.model_id, provider=model.provider_id, status=status,
                   stream=stream, usage=usage, cost=cost, charged=status in (200, 499) and not byok,
                   error=error)
