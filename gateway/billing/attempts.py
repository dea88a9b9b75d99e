"""Billing's part in each attempt of a routed request (the contract: gateway.routing.attempts):
an attempt on the gateway's key holds its worst case first, and the request that found no
provider is recorded, not charged."""

from collections.abc import Callable

from gateway.billing import reservations
from gateway.billing.charging import failed
from gateway.catalogue import Resolved
from gateway.edge.errors import ApiError, UpstreamError
from gateway.services import Caller, Services


class AttemptCharges:
    """Holds nothing itself: what a request holds is on its Caller."""

    async def hold_attempt(self, services: Services, caller: Caller, path: str, model: Resolved,
                           ceiling: Callable[[Resolved], int]) -> str:
        key = await services.provider_keys.key_for(caller.org_id, model.provider_id)
        if not key:
            await reservations.cover(services, caller, path, model, ceiling(model))
        return key

    async def attempt_failed(self, services: Services, caller: Caller, path: str, model: Resolved, requested: str,
                             failure: UpstreamError, *, stream: bool) -> ApiError:
        return await failed(services, caller, path, model, requested, failure, stream=stream)
