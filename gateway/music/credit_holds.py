"""Credit holds: a flat price is reserved before the upstream call and settled or released after.

The ledger refuses a hold the available balance cannot cover, inside its write transaction,
so concurrent requests (in any number of processes) can never spend more than the balance.
"""

from collections.abc import Sequence

from gateway.billing.charging import Outcome, commit, request_event
from gateway.errors import ApiError
from gateway.keys import new_id
from gateway.services import Caller, Services
from ledger.events import CreditsHeld, Event, HoldReleased
from ledger.recorder import Append, Content, InsufficientCredit


class Hold:
    """A reservation of `amount_inr_nano` for one request."""

    def __init__(self, hold_id: str, amount_inr_nano: int) -> None:
        self.hold_id, self.amount_inr_nano = hold_id, amount_inr_nano

    def released(self) -> HoldReleased:
        return HoldReleased(hold_id=self.hold_id, amount_inr_nano=self.amount_inr_nano)


def insufficient_credit() -> ApiError:
    return ApiError(402, "insufficient credits: the organization's available balance does not"
                         " cover this generation; add credits to continue", type="insufficient_credits")


async def reserve(services: Services, caller: Caller, amount_inr_nano: int, also: Sequence[Event] = ()) -> Hold:
    """Hold the amount (with `also` in the same unit), or 402. A quick look at the local view
    spares the ledger a doomed write."""
    account = services.directory.account(caller.org_id)
    if account is None or account.available_inr_nano < amount_inr_nano:
        raise insufficient_credit()
    hold = Hold(new_id("hold"), amount_inr_nano)
    event = CreditsHeld(hold_id=hold.hold_id, request_id=caller.request_id, amount_inr_nano=amount_inr_nano)
    try:
        await services.writer.append(Append(caller.org_id, [*also, event]))
    except InsufficientCredit:
        raise insufficient_credit() from None
    return hold


async def settle(services: Services, caller: Caller, hold: Hold | None, outcome: Outcome,
                 also: list[Event], contents: Sequence[Content | None] = ()) -> None:
    """End the hold (if one was taken) and record the request in one unit: charged on success,
    released otherwise."""
    prompt = next((c for c in contents if c is not None), None)
    released = [hold.released()] if hold else []
    await commit(services, caller, [*released, request_event(caller, outcome, prompt), *also], contents)
