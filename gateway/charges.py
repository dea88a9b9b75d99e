"""Recording requests in the ledger: one RequestCompleted event per request, exactly once."""

import hashlib

import msgspec
import structlog

from gateway.billing import FREE, Cost, Usage
from gateway.errors import ApiError
from gateway.jsonio import encode
from gateway.services import Caller, Services
from ledger.events import RequestCompleted
from ledger.money import from_nano
from ledger.recorder import Append, Content


class Outcome(msgspec.Struct, frozen=True, kw_only=True):
    """How a request ended, as billing sees it."""

    route: str
    model: str
    provider: str
    status: int
    stream: bool = False
    usage: Usage = Usage()
    cost: Cost = FREE
    charged: bool = False  # failed requests are recorded, with their status, but not charged
    error: str = ""


def require_credit(services: Services, caller: Caller) -> None:
    """402 unless the organization still has credit left."""
    account = services.directory.account(caller.org_id)
    if account is None or account.balance_inr_nano <= 0:
        raise ApiError(402, "insufficient credits: the organization's balance is used up;"
                            " add credits to continue", type="insufficient_credits")


async def record(services: Services, caller: Caller, outcome: Outcome, text: dict | None = None) -> None:
    """Append the request's event (and its text, if the org retains text); durable on return."""
    contents = _content(services, caller, text)
    event = RequestCompleted(
        request_id=caller.request_id, key_id=caller.principal.key_id, route=outcome.route,
        model=outcome.model, provider=outcome.provider, status=outcome.status,
        stream=outcome.stream, prompt_tokens=outcome.usage.prompt_tokens,
        completion_tokens=outcome.usage.completion_tokens,
        cost_usd_nano=outcome.cost.usd_total_nano, cost_inr_nano=outcome.cost.inr_nano,
        charged_inr_nano=outcome.cost.inr_nano if outcome.charged else 0,
        usd_to_inr=str(outcome.cost.rate), latency_ms=caller.elapsed_ms(), error=outcome.error,
        content_id=contents[0].content_id if contents else "",
        content_hash=contents[0].sha256 if contents else "")
    await services.writer.append(Append(caller.org_id, [event], contents=contents))
    structlog.contextvars.bind_contextvars(  # for the request's canonical log line
        model=outcome.model, provider=outcome.provider, cost_inr=str(from_nano(event.charged_inr_nano)))


def _content(services: Services, caller: Caller, text: dict | None) -> list[Content]:
    account = services.directory.account(caller.org_id)
    if text is None or account is None or account.retention == "none":
        return []
    body = encode(text)
    return [Content("cnt_" + caller.request_id.removeprefix("req_"), body,
                    hashlib.sha256(body).hexdigest())]
