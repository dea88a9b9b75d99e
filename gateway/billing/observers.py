"""What follows a charge: the observers the app registers (`Services.charge_observers`, assembled
in gateway.app.services_ctx), each told of every request once its charge is durable, in the
order registered, as structlog passes an event through its processors. Billing knows them only
by this contract: the request facts, cost headers, metrics and token counts they keep are theirs.
"""

from typing import Protocol

from gateway.ops.facts import RequestFacts
from ledger.events import RequestCompleted


class ChargeObserver(Protocol):
    async def charged(self, facts: RequestFacts, event: RequestCompleted) -> None:
        """The request whose facts are `facts` was recorded as `event`, durably. The client is owed
        its answer by now: a failure here is logged by billing, and the next observer still called."""
        ...
