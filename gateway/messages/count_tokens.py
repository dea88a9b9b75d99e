"""POST /v1/messages/count_tokens: a Messages request's input tokens, as its provider counts them.

Only a provider that counts natively answers (an adapter in `Providers.token_counting`:
Anthropic); for other models it is a 400 saying so, never an estimate. The client's body goes
up as it is. Counting is free at Anthropic and free here: the request is recorded in the
ledger like any other (at zero cost, with no tokens billed and no text kept), so the
organization's log shows each call made on its behalf; an upstream failure is recorded as
failures are. It needs what any upstream call needs: the organization's own key for the
provider, or credit left (402).
"""

from typing import Annotated

import msgspec

from gateway.accounts import key_policy
from gateway.billing.charging import failed, outcome, own_key_or_credit, record
from gateway.edge.errors import ANTHROPIC_ROOT, UpstreamError, bad_request
from gateway.messages.request import AnthropicTool, AnthropicToolChoice, Block, InputMessage
from gateway.providers.base import ChatCall
from gateway.resolution import CHAT, resolve
from gateway.services import Caller, Services

ROUTE = ANTHROPIC_ROOT + "/count_tokens"


class CountTokensRequest(msgspec.Struct):
    """POST /v1/messages/count_tokens: a Messages request without `max_tokens` (its other
    fields, such as `thinking`, pass through to the provider untouched)."""

    model: str
    messages: Annotated[list[InputMessage], msgspec.Meta(min_length=1)]
    system: str | list[Block] | None = None
    tools: list[AnthropicTool] | None = None
    tool_choice: AnthropicToolChoice | None = None


async def count(services: Services, caller: Caller, body: dict, request: CountTokensRequest) -> dict:
    """`{"input_tokens": N}` from the model's provider; recorded, never charged."""
    [served] = await key_policy.permitted(services, caller, ROUTE, request.model,
                                          [resolve(services, request.model, CHAT)])
    model = served.model
    counter = services.providers.token_counting.get(model.provider_id)
    if counter is None:
        raise bad_request(f"counting tokens is not available for model {request.model!r}: its provider"
                          f" ({model.provider_id}) has no count of its own and the gateway does not guess"
                          " one; Anthropic's models count natively", "model")
    api_key = await own_key_or_credit(services, caller, model.provider_id)
    try:
        tokens = await counter.count_tokens(ChatCall(caller.request_id, model.upstream_model, body, api_key))
    except UpstreamError as exc:
        raise await failed(services, caller, ROUTE, model, request.model, exc) from None
    await record(services, caller, outcome(ROUTE, model, 200, byok=bool(api_key)))
    return {"input_tokens": tokens}
