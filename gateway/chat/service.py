"""Chat completions: validate, pick the provider, call it once, bill the usage; a stream is
relayed by gateway.chat.streams."""

from collections.abc import Callable

from gateway.billing import ceilings
from gateway.billing.charging import bill
from gateway.billing.pricing import usage_body
from gateway.catalogue import Resolved
from gateway.chat.request import ChatRequest
from gateway.chat.streams import ROUTE, ChatRelay
from gateway.edge.errors import bad_request
from gateway.billing.pricing import Cost
from gateway.providers.base import ChatCall, ChatReply
from gateway.providers.capabilities import ChatProvider
from gateway.resolution import CHAT, Served
from gateway.routing import failover
from gateway.services import Caller, Services


def with_token_limit(request: ChatRequest) -> Callable[[list[Served[ChatProvider]]], list[Served[ChatProvider]]]:
    """The providers that can take `request`: without max_tokens, those that do not demand it;
    400 before any upstream call when every one does (spec 7: Anthropic)."""
    def usable(candidates: list[Served[ChatProvider]]) -> list[Served[ChatProvider]]:
        if request.max_tokens is not None or request.max_completion_tokens is not None:
            return candidates
        if kept := [served for served in candidates
                    if not served.provider.requires_max_tokens(served.model.upstream_model)]:
            return kept
        raise bad_request(f"max_tokens is required for model {request.model!r}: its provider"
                          f" ({candidates[0].model.provider_id}) refuses requests without it", "max_tokens")
    return usable


def ceiling(services: Services, body: dict) -> Callable[[Resolved], int]:
    """The worst case of a chat `body` on each provider it is tried on: the body as its prompt,
    and the output the body lets that provider write as its adapter sends it (limits translated,
    `n` forwarded or not)."""
    return ceilings.sent(services, body, lambda model: services.providers.chat[model.provider_id].chat_allowance(body),
                         body.get("service_tier"))


def prompt_text(request: ChatRequest) -> list[dict]:
    """The conversation as retained in the content store."""
    return [{"role": m.role, "content": m.content} for m in request.messages]


def chat_call(caller: Caller, body: dict, served: Served, api_key: str) -> ChatCall:
    """The call upstream to the provider of `served`, with the organization's own key if it has one."""
    return ChatCall(caller.request_id, served.model.upstream_model, body, api_key)


async def complete(services: Services, caller: Caller, body: dict, request: ChatRequest) -> dict:
    """A non-streamed completion from the first provider that answers, billed before it is returned."""
    answered = await failover.routed(
        services, caller, body, request.model, CHAT,
        lambda served, key: served.provider.chat(chat_call(caller, body, served, key)),
        path=ROUTE, ceiling=ceiling(services, body), usable=with_token_limit(request))
    reply = answered.answer
    answer = [c.get("message", {}).get("content") for c in reply.body.get("choices") or ()]
    cost = await bill(services, caller, ROUTE, answered.served.model, reply.usage,
                      {"request": prompt_text(request), "response": answer}, byok=answered.byok,
                      answer=lambda cost: with_cost(reply, cost))
    return with_cost(reply, cost)


def with_cost(reply: ChatReply, cost: Cost) -> dict:
    """The answer's body with its usage carrying the gateway's cost fields."""
    return {**reply.body, "usage": {**(reply.body.get("usage") or {}), **usage_body(reply.usage, cost)}}


async def open_stream(services: Services, caller: Caller, body: dict, request: ChatRequest) -> ChatRelay:
    """Start a streamed completion with the first provider that accepts it; errors before then
    are ordinary error responses."""
    answered = await failover.routed(
        services, caller, body, request.model, CHAT,
        lambda served, key: served.provider.open_chat_stream(chat_call(caller, body, served, key)),
        path=ROUTE, ceiling=ceiling(services, body), stream=True, usable=with_token_limit(request))
    return ChatRelay(services, caller, request, answered.served.model, answered.answer, prompt_text(request),
                     byok=answered.byok)
