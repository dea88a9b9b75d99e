"""Creating a batch: every line checked before anything is held or sent, the batch's worst case
(each line's ceiling at the prices it will be charged) held against the org's balance and the
creating key's budget in the unit that records the batch, or a 402 and no batch at all.

A batch goes to its provider's own batch API (`native`) when the model's first provider has one
for the batch's route (gateway.config.batch_api); its lines are then charged at batch prices
(`Prices.batched`) and sent nowhere else. Any other batch is run by the gateway, each line
through its single route (gateway.batches.gateway_run), failing over as a single request does,
at the regular price: its ceiling is the dearest of the providers it may be sent to.
"""

from collections.abc import AsyncIterator

import msgspec

from gateway.accounts.key_policy import allows, not_allowed
from gateway.accounts.keys import new_id
from gateway.batches import files
from gateway.batches.endpoints import LineRoute
from gateway.batches.lines import MAX_ERRORS, MAX_LINES, BadLine, Line, Seen, parse, refused, request_of, split
from gateway.billing.charging import appended
from gateway.billing.reservations import budget_short, org_short
from gateway.catalogue import Resolved
from gateway.edge.errors import ApiError, bad_request
from gateway.resolution import Served, servers
from gateway.services import Caller, Services
from ledger.events import BatchCreated, BatchEnded, BatchLineError, CreditsHeld, Event
from ledger.recorder import Append, BudgetExceeded, InsufficientCredit

WINDOW_US = 24 * 3600 * 1_000_000  # "24h", the only completion window either API offers


class Order(msgspec.Struct, frozen=True, kw_only=True):
    """What a batch was asked for, in either API's shape."""

    api: str  # "openai" | "anthropic"
    endpoint: str
    route: LineRoute
    input_file_id: str
    metadata: dict[str, str] = {}


class Plan:
    """What checking a batch's lines found: its model, where it runs, its worst case, its errors."""

    def __init__(self) -> None:
        self.model = ""
        self.candidates: list[Served] = []
        self.paid: list[Resolved] = []  # the candidates paid from credits (no key of the org's), as charged
        self.native = False
        self.lines = self.worst_inr_nano = 0
        self.errors: list[BatchLineError] = []

    def fail(self, bad: BadLine) -> None:
        if len(self.errors) < MAX_ERRORS:
            self.errors.append(bad.error)


async def create(services: Services, caller: Caller, order: Order) -> str:
    """Record the batch (held, or failed with its bad lines named); its id. 400 for an input file
    that is not the org's batch input, 402 when its worst case cannot be held."""
    record = await files.stored_file(services, caller.org_id, order.input_file_id)
    if record is None or record.deleted_at_us is not None or record.purpose != "batch":
        raise bad_request(f"input_file_id {order.input_file_id!r} is not a batch input file of this"
                          " organization (upload one with purpose batch)", "input_file_id")
    plan = await check_lines(services, caller, order, files.read_file(services, record))
    batch_id = new_id("batch" if order.api == "openai" else "msgbatch")
    await _record(services, caller, order, plan, batch_id)
    return batch_id


async def check_lines(services: Services, caller: Caller, order: Order, chunks: AsyncIterator[bytes]) -> Plan:
    """Every line checked as its single route would check it, the worst cases summed."""
    plan, seen = Plan(), Seen()
    async for raw in split(chunks):
        if plan.lines == MAX_LINES:
            plan.fail(BadLine(0, "too_many_lines", f"a batch holds at most {MAX_LINES} requests"))
            break
        plan.lines += 1
        try:
            line = parse(order.api, plan.lines - 1, raw, order.endpoint)
            seen.add(line)
            plan.worst_inr_nano += await _line_worst(services, caller, order.route, line, plan)
        except BadLine as bad:
            plan.fail(bad)
    if not plan.lines:
        plan.fail(BadLine(0, "empty_file", "the input file holds no requests"))
    return plan


async def _line_worst(services: Services, caller: Caller, route: LineRoute, line: Line, plan: Plan) -> int:
    request = request_of(route, line)
    model = getattr(request, "model", "")
    try:
        if not plan.model:
            await _choose(services, caller, route, model, plan)
        elif model != plan.model:
            raise bad_request(f"every request of a batch is for one model; this one is for {model!r}, the batch"
                              f" for {plan.model!r}", "model")
        return await worst_of(services, caller, route, line, request, plan)
    except ApiError as error:
        raise refused(line, error) from None


async def planned(services: Services, caller: Caller, route: LineRoute, model: str, native: bool) -> Plan:
    """The plan a running batch's lines are sent by (as `check_lines` made it at creation)."""
    plan = Plan()
    await _choose(services, caller, route, model, plan, native)
    return plan


async def worst_of(services: Services, caller: Caller, route: LineRoute, line: Line, request: object,
                   plan: Plan) -> int:
    """A line's worst case: its ceiling on the dearest provider it may be sent to and paid from
    credits; ApiError for a body its route refuses."""
    ceiling = await route.check(services, caller, line.body, request, plan.candidates)
    return max((ceiling(model) for model in plan.paid), default=0)


async def _choose(services: Services, caller: Caller, route: LineRoute, model: str, plan: Plan,
                  native_as: bool | None = None) -> None:
    """The batch's model, the providers its lines may go to, and whether it runs natively (as
    `native_as` says, for a batch that runs already)."""
    limits = services.directory.spend_limits(caller.principal.key_id)
    candidates = [served for served in servers(services, model, route.capability) if allows(limits, served.model)]
    if not candidates:
        raise not_allowed(model, limits.models)
    native = services.providers.batch.get(candidates[0].model.provider_id)
    plan.model = model
    plan.native = native is not None and native.batchable(route.path) if native_as is None else native_as
    plan.candidates = candidates[:1] if plan.native else candidates
    plan.paid = [_as_charged(served.model, plan.native) for served in plan.candidates
                 if not await services.provider_keys.key_for(caller.org_id, served.model.provider_id)]


def _as_charged(model: Resolved, native: bool) -> Resolved:
    """`model` at the prices its batch lines are charged: batch prices natively, else its own."""
    return msgspec.structs.replace(model, prices=model.prices.batched()) if native else model


async def _record(services: Services, caller: Caller, order: Order, plan: Plan, batch_id: str) -> None:
    now = services.recorder.clock()
    first = plan.candidates[0].model if plan.candidates else None
    created = BatchCreated(
        batch_id=batch_id, key_id=caller.principal.key_id, api=order.api, endpoint=order.endpoint,  # type: ignore[arg-type]
        model=first.model_id if first else plan.model, provider=first.provider_id if first else "",
        native=plan.native, input_file_id=order.input_file_id, lines=plan.lines, hold_id="",
        completion_window="24h", expires_at_us=now + WINDOW_US, metadata=order.metadata)
    if plan.errors and order.api == "anthropic":  # Anthropic refuses such a batch outright
        raise _refusal(plan.errors)
    if plan.errors:
        await services.writer.append(Append(caller.org_id, [created, BatchEnded(
            batch_id=batch_id, status="failed", errors=tuple(plan.errors))]))
        return
    if plan.worst_inr_nano <= 0:  # the org pays every provider with its own key: nothing to hold
        await services.writer.append(Append(caller.org_id, [created]))
        return
    await _hold(services, caller, created, plan.worst_inr_nano + 1)  # the keel: a line's draw never ends it


def _refusal(errors: list[BatchLineError]) -> ApiError:
    """400 naming the bad requests (by their place in `requests`, from 0) and what is wrong."""
    named = "; ".join(f"requests[{e.line - 1}]: {e.message}" if e.line else e.message for e in errors[:5])
    more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
    return bad_request(f"the batch cannot run: {named}{more}", "requests")


async def _hold(services: Services, caller: Caller, created: BatchCreated, amount: int) -> None:
    account = services.directory.account(caller.org_id)
    if account is None or account.available_inr_nano < amount:  # the local view spares a doomed write
        raise org_short()
    hold = CreditsHeld(hold_id=new_id("hold"), request_id=created.batch_id, amount_inr_nano=amount,
                       key_id=caller.principal.key_id, lease_us=services.leases.lease_us)
    events: list[Event] = [hold, msgspec.structs.replace(created, hold_id=hold.hold_id)]
    try:
        await appended(services, Append(caller.org_id, events), lambda: None)
    except InsufficientCredit:
        raise org_short() from None
    except BudgetExceeded as exc:
        limits = services.directory.spend_limits(hold.key_id)
        raise budget_short(limits, exc.room_inr_nano, amount, services.recorder.clock()) from None
