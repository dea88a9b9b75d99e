"""The request-body bytes one process holds at once: one budget, drawn on by every request.

A body that does not fit waits briefly for others to finish (`[server] body_budget_wait_s`), then
is answered 503 with Retry-After; one that could never fit the whole budget, 413. A request's
bytes go back when it ends (gateway.edge.intake), which is when its body is let go.
"""

import asyncio

from gateway.edge.errors import ApiError

RETRY_AFTER_S = 1


def server_busy() -> ApiError:
    return ApiError(503, "the gateway is holding as many request bodies as it may; retry shortly",
                    type="service_unavailable", code="server_busy", headers={"Retry-After": str(RETRY_AFTER_S)})


def larger_than_budget(limit: int) -> ApiError:
    return ApiError(413, f"the request body is larger than this gateway holds at once ({limit} bytes)",
                    type="request_too_large")


class BodyBudget:
    """The request-body bytes one process holds at once, shared by every request."""

    def __init__(self, max_bytes: int, wait_s: float) -> None:
        self.max_bytes, self.wait_s = max_bytes, wait_s
        self.used = 0
        self._freed = asyncio.Event()

    async def take(self, size: int) -> None:
        """Hold `size` more bytes: at once if they fit, after others are given back if that
        happens within `wait_s`, else 503."""
        if self.used + size > self.max_bytes:  # only then is a timer worth arming
            await self._room_for(size)
        self.used += size

    async def _room_for(self, size: int) -> None:
        try:
            async with asyncio.timeout(self.wait_s):
                while self.used + size > self.max_bytes:
                    self._freed.clear()
                    await self._freed.wait()
        except TimeoutError:
            raise server_busy() from None

    def give_back(self, size: int) -> None:
        self.used -= size
        self._freed.set()  # every waiter looks again


class BodyHold:
    """What one request holds of the budget; all of it is given back when the request ends."""

    def __init__(self, budget: BodyBudget) -> None:
        self._budget, self.size = budget, 0

    async def take(self, size: int) -> None:
        """Hold `size` more bytes for this request; 413 if its body could never fit the budget."""
        if self.size + size > self._budget.max_bytes:
            raise larger_than_budget(self._budget.max_bytes)
        await self._budget.take(size)
        self.size += size

    def release(self) -> None:
        if self.size:  # nothing held: no waiter to wake
            self._budget.give_back(self.size)
            self.size = 0

