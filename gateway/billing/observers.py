"""What follows a charge: the observers the app registers (`Services.charge_observers`, assembled
in gateway.app.services_ctx), each told of every request once its charge is durable, in the
order registered, as structlog passes an event through its processors. Billing knows them only
by this contract: the request facts, cost headers, metrics and token counts they keep are theirs.
"""

from collections.abc import Iterable
from typing import Protocol

import structlog

from gateway.ops.facts import RequestFacts
from ledger.events import RequestCompleted

log = structlog.get_logger("gateway.billing.observers")


class ChargeObserver(Protocol):
    async def charged(self, facts: RequestFacts, event: RequestCompleted) -> None:
        """The request whose facts are `facts` was recorded as `event`, durably. The client is owed
        its answer by now: a failure here is logged by billing, and the next observer still called."""
        ...


async def tell(observers: Iterable[ChargeObserver], facts: RequestFacts, event: RequestCompleted) -> None:
    """Tell each observer, in order, of a charge now durable. The client is owed its answer now, so
    none of them may fail the request: a failure is logged once, with its traceback, and the
    answer stands."""
    for observer in observers:
        try:
            await observer.charged(facts, event)
        except Exception:  # logged, not hidden; see the docstring
            log.exception("after_commit_failed", request_id=event.request_id, observer=type(observer).__name__)
