"""Charging requests: the charged rule (Outcome.charged), the credit checks before a paid
request, and recording each request in the ledger: one RequestCompleted event, exactly once."""

import asyncio
import hashlib
from collections.abc import Awaitable, Callable, Sequence

import msgspec
import structlog

from gateway.billing import observers
from gateway.billing.pricing import FREE, NO_USAGE, Cost, cost_headers, model_cost
from gateway.catalogue import Resolved
from gateway.edge.errors import ApiError, UpstreamError
from gateway.jsonio import encode
from gateway.providers.usage import Usage
from gateway.services import Caller, Services
from ledger import charges
from ledger.events import Event, RequestCompleted
from ledger.money import from_nano
from gateway.billing.releases import without_holds
from ledger.recorder import Append, CommitInDoubt, Content, HoldNotHeld, LedgerUnavailable
from ledger.writer import Withdrawn

log = structlog.get_logger("gateway.billing.charging")


class Outcome(msgspec.Struct, frozen=True, kw_only=True):
    """How a request ended, as billing sees it."""

    route: str
    model: str
    provider: str
    status: int
    stream: bool = False
    usage: Usage = Usage()
    cost: Cost = FREE  # what was delivered costs (a failure, or a generation cut off, delivered nothing)
    byok: bool = False  # the organization paid the provider with its own key
    error: str = ""

    @property
    def charged(self) -> bool:
        """Whether it is charged: ledger.charges.charged, the billing rule."""
        return charges.charged(self.status, self.byok)

    @property
    def charged_inr_nano(self) -> int:
        """What the organization's balance pays for this request."""
        return self.cost.inr_nano if self.charged else 0

    def headers(self) -> dict[str, str]:
        """Its cost as the response headers of a delivered answer."""
        return cost_headers(self.cost.usd_total_nano, self.cost.inr_nano, self.cost.rate, self.charged_inr_nano)


def outcome(route: str, model: Resolved, status: int, usage: Usage = NO_USAGE, cost: Cost = FREE, *,
            byok: bool = False, stream: bool = False, error: str = "") -> Outcome:
    """How a request for `model` ended (see Outcome.charged for whether it is charged)."""
    return Outcome(route=route, model=model.model_id, provider=model.provider_id, status=status,
                   stream=stream, usage=usage, cost=cost, byok=byok, error=error)


def _has_credit(services: Services, caller: Caller) -> bool:
    account = services.directory.account(caller.org_id)
    return account is not None and account.balance_inr_nano > 0


def require_credit(services: Services, caller: Caller) -> None:
    """402 unless the organization still has credit left."""
    if not _has_credit(services, caller):
        raise _insufficient_credits()


def require_credit_before_body(services: Services, caller: Caller) -> None:
    """402 before a paid request's body is read, when no credit is left and the organization has
    no key of its own for any provider (which provider the request is for is in the body)."""
    if _has_credit(services, caller):
        return
    if not any(services.directory.provider_key(caller.org_id, provider) for provider in services.providers.ids):
        raise _insufficient_credits()


def _insufficient_credits() -> ApiError:
    return ApiError(402, "insufficient credits: the organization's balance is used up and it has"
                         " no key of its own for this provider; add credits to continue",
                    type="insufficient_credits")


async def own_key_or_credit(services: Services, caller: Caller, provider_id: str) -> str:
    """The organization's own key for the provider, else "" when it has credit left (the gateway's
    key, paid from credits). 402 only when no credit is left and no key of the org's applies (spec 7)."""
    key = await services.provider_keys.key_for(caller.org_id, provider_id)
    if not key:
        require_credit(services, caller)
    return key


def held(caller: Caller) -> int:
    """What the request holds now, on its own and in escrow (nano-INR; gateway.billing.reservations)."""
    return sum(hold.amount_inr_nano for hold in caller.holds) + sum(r.amount_inr_nano for r in caller.reserved)


def request_event(caller: Caller, outcome: Outcome, content: Content | None = None) -> RequestCompleted:
    """The ledger event for a finished request; charged only if the outcome says so."""
    return RequestCompleted(
        request_id=caller.request_id, key_id=caller.principal.key_id, route=outcome.route,
        model=outcome.model, provider=outcome.provider, status=outcome.status,
        stream=outcome.stream, prompt_tokens=outcome.usage.prompt_tokens,
        completion_tokens=outcome.usage.completion_tokens,
        cost_usd_nano=outcome.cost.usd_total_nano, cost_inr_nano=outcome.cost.inr_nano,
        charged_inr_nano=outcome.charged_inr_nano,
        usd_to_inr=str(outcome.cost.rate), latency_ms=caller.elapsed_ms(), error=outcome.error,
        content_id=content.content_id if content else "", content_hash=content.sha256 if content else "",
        attempts=tuple(caller.attempts), priced=outcome.cost.priced, byok=outcome.byok,
        batch_id=caller.batch_id, custom_id=caller.custom_id)


def keeps_text(services: Services, caller: Caller) -> bool:
    """Whether the caller's organization keeps the text of its requests (retention is not none)."""
    account = services.directory.account(caller.org_id)
    return account is not None and account.retention != "none"


def retained(services: Services, caller: Caller, suffix: str, text: object) -> Content | None:
    """`text` as a content row, or None when the organization keeps no text (retention none). A
    batch line's answer is kept whatever the retention, until its output file holds it
    (gateway.batches.finishing removes it then for an org that keeps no text)."""
    if text is None or not (caller.batch_id or keeps_text(services, caller)):
        return None
    body = encode(text)
    return Content(f"cnt_{caller.request_id.removeprefix('req_')}{suffix}", body,
                   hashlib.sha256(body).hexdigest())


async def commit(services: Services, caller: Caller, events: list[Event],
                 contents: Sequence[Content | None] = ()) -> None:
    """Append one request's events and text as one unit, with the end of what it holds (its charge
    drawn from its escrow slices, its own holds released); durable on return. What the client is
    then told and what the ledger holds agree:
    - not taken within `record_timeout_s` (withdrawn unwritten), or refused: LedgerError, and
      nothing is recorded, then or later;
    - a COMMIT the database never answered (CommitInDoubt): the record stands; the same unit is
      appended again in the background until the ledger takes it or shows it has it (at most
      once: a request id is recorded once), and this returns as if it were durable.
    A hold that lapsed meanwhile (this process away longer than a lease) was expired: the request
    is charged all the same, without it, and the anomaly noted."""
    kept = [c for c in contents if c is not None]
    settled = [settle(services, caller, e) if isinstance(e, RequestCompleted) else e for e in events]
    unit = Append(caller.org_id, [*(hold.released() for hold in caller.holds), *settled], contents=kept)
    try:
        await _recorded(services, caller, unit, settled)
    except HoldNotHeld:
        services.escrow.lose(caller.reserved)
        lapsed = without_holds(Append(caller.org_id, settled, contents=kept))
        await _recorded(services, caller, lapsed, [])
    for event in settled:
        if isinstance(event, RequestCompleted):
            await observers.tell(services.charge_observers, caller.facts, event)


async def _recorded(services: Services, caller: Caller, unit: Append, settled: Sequence[Event]) -> None:
    """Append `unit` within the record timeout; a commit in doubt is kept (see `commit`)."""
    try:
        await appended(services, unit, lambda: ended(services, caller, settled),
                       within=services.config.billing.record_timeout_s)
    except CommitInDoubt as exc:
        if any(isinstance(e, RequestCompleted) and e.draws for e in settled):
            services.escrow.lose(caller.reserved)  # drawn or not, we cannot know: the slice lapses
        ended(services, caller, [])  # what it held is released by the unit, whenever it lands
        log.warning("record_in_doubt", request_id=caller.request_id, error=str(exc)[:300])
        services.metrics.observe_record("in_doubt")
        services.releases.keep(unit, caller.request_id)
    except LedgerUnavailable as exc:  # nothing was written, and nothing of it can be later
        services.metrics.observe_record("withdrawn" if isinstance(exc, Withdrawn) else "failed")
        raise


def settle(services: Services, caller: Caller, event: RequestCompleted) -> RequestCompleted:
    """The record with its charge drawn from the request's escrow slices, and the anomaly named
    when its true cost exceeded what it held (it is charged that cost all the same)."""
    draws = services.escrow.draws(caller.reserved, event.charged_inr_nano)
    holding = held(caller)
    if not (caller.holds or caller.reserved) or event.charged_inr_nano <= holding:
        return msgspec.structs.replace(event, draws=draws) if draws else event
    anomaly = (f"charged its true cost of {from_nano(event.charged_inr_nano)} INR, more than the"
               f" {from_nano(holding)} INR held for its worst case")
    services.metrics.observe_anomaly(event.model, event.provider)
    log.warning("charge_above_hold", request_id=event.request_id, model=event.model, provider=event.provider,
                charged_inr_nano=event.charged_inr_nano, held_inr_nano=holding)
    return msgspec.structs.replace(event, draws=draws, anomaly=anomaly)


def ended(services: Services, caller: Caller, recorded: Sequence[Event]) -> None:
    """The request's holds ended with its record: its slices hold what it drew less, its own holds
    no longer need renewing."""
    draws = tuple(d for e in recorded if isinstance(e, RequestCompleted) for d in e.draws)
    services.escrow.settle(caller.reserved, draws)
    caller.reserved.clear()
    for hold in caller.holds:
        services.leases.untrack(hold.hold_id)
    caller.holds.clear()


async def appended(services: Services, unit: Append, then: Callable[[], None], within: float | None = None) -> None:
    """Append `unit` (withdrawn if not taken `within` seconds), then `then()`, both even when the
    request is cancelled meanwhile. The writer commits every unit it took, whatever became of its
    caller, so what a request notes of its holds (`then`) must follow the ledger: else a hold
    would be released twice, or never."""
    async def append_then() -> None:
        append = services.writer.append(unit, within)
        await (append if services.tracing is None else services.tracing.committed(append))
        then()

    await despite_cancellation(append_then())


async def despite_cancellation(work: Awaitable[object]) -> None:
    """Finish `work` (a request's record) even when the request is cancelled meanwhile, and only
    then let the cancellation on: the request's log line then states its charge. aiohttp cancels
    the handler of a client that left, at times just after the write that found it gone."""
    task = asyncio.ensure_future(work)
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        await asyncio.wait([task])
        raise


async def record(services: Services, caller: Caller, outcome: Outcome, text: dict | None = None) -> None:
    """Record a request (and its text, if the org retains text); durable on return."""
    content = retained(services, caller, "", text)
    if services.tracing is not None and text is not None:
        services.tracing.content(text)
    await commit(services, caller, [request_event(caller, outcome, content)], [content])


def price(services: Services, model: Resolved, usage: Usage) -> Cost:
    """What `usage` of `model` costs at its catalogue prices and the configured rate."""
    return model_cost(model.prices, usage, services.config.billing.usd_to_inr)


async def bill(services: Services, caller: Caller, route: str, model: Resolved, usage: Usage,
               text: dict | None, *, byok: bool, status: int = 200, stream: bool = False, error: str = "",
               answer: Callable[[Cost], dict] | None = None) -> Cost:
    """Price `usage` (`price`) and record the request with its text (charged by Outcome's
    rule); durable on return. The cost, for the answer to report. A batch line records instead
    the `answer` the cost makes (its output line's body), so a crash loses no answer it paid for."""
    cost = price(services, model, usage)
    if caller.batch_id and answer is not None:
        text = {"body": answer(cost)}
    await record(services, caller, outcome(route, model, status, usage, cost, byok=byok, stream=stream,
                                           error=error), text)
    return cost


async def record_failure(services: Services, caller: Caller, route: str, model: Resolved, exc: UpstreamError,
                         *, stream: bool = False) -> None:
    """Record a provider's failure with the status the client sees; not charged."""
    await record(services, caller, outcome(route, model, exc.client_status(), stream=stream, error=exc.message))


async def failed(services: Services, caller: Caller, route: str, model: Resolved, requested: str,
                 exc: UpstreamError, *, stream: bool = False) -> ApiError:
    """Record a provider's failure (not charged); the gateway error to answer with."""
    await record_failure(services, caller, route, model, exc, stream=stream)
    return exc.to_api_error(model.provider_id, requested)


async def refused_unread(services: Services, caller: Caller, route: str, error: ApiError) -> ApiError:
    """Record a request refused before its body (and so its model) was read: an expired key, an
    organization with nothing left to pay with."""
    await record(services, caller, Outcome(route=route, model="", provider="", status=error.status,
                                           error=error.message))
    return error


async def refused(services: Services, caller: Caller, route: str, model: Resolved, error: ApiError) -> ApiError:
    """Record a request the client's own input broke off after the upstream call began."""
    await record(services, caller, outcome(route, model, error.status, error=error.message))
    return error
