"""What failover asks of billing around each attempt, as a contract: billing keeps it
(gateway.billing.attempts) and the app hands it to failover as `Services.attempt_billing`. Routing
decides which provider is tried next; what an attempt holds and how a failure is recorded are
billing's, reached only through this.
"""

from collections.abc import Callable
from typing import Protocol, TypeVar

from gateway.catalogue import Resolved
from gateway.edge.errors import ApiError, UpstreamError

S = TypeVar("S", contravariant=True)  # the running gateway's parts (gateway.services.Services)
C = TypeVar("C", contravariant=True)  # the request being routed (gateway.services.Caller)


class AttemptBilling(Protocol[S, C]):
    """Billing's part in a routed request's attempts."""

    async def hold_attempt(self, services: S, caller: C, path: str, model: Resolved,
                           ceiling: Callable[[Resolved], int]) -> str:
        """Before an attempt on `model`'s provider: the key to call it with. The organization's own
        key for that provider, else "" (the gateway's key, and the request then holds its worst
        case on `model`, `ceiling(model)`, first); an ApiError (402, recorded) when it cannot."""
        ...

    async def attempt_failed(self, services: S, caller: C, path: str, model: Resolved, requested: str,
                             failure: UpstreamError, *, stream: bool) -> ApiError:
        """The request failed on `model`'s provider with no attempt left: record it (not charged,
        its holds released); the error the client is answered with (`requested`: the model it named)."""
        ...
