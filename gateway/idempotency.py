"""Idempotency-Key for POST /v1/music: one generation, one charge, however often a client retries.

The same key with the same body within 24 hours returns the first response; a duplicate that
arrives while the first is still running waits for it; the same key with another body is 409.
Keys are scoped to the organization. The ledger remembers which request a key produced, so a
replay after a restart rebuilds the response from the stored track; audio that was never stored
(storage inline or none) is replayed from this process's memory for as long as it keeps it.
"""

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from gateway.errors import ApiError
from ledger.recorder import Recorder

WINDOW_S = 24 * 3600
MAX_KEY_CHARS = 255


def conflict(message: str) -> ApiError:
    return ApiError(409, message, type="idempotency_conflict", param="Idempotency-Key")


class IdempotencyKeys:
    def __init__(self, recorder: Recorder, remembered: int = 64) -> None:
        self._recorder = recorder
        self._running: dict[tuple[str, str], tuple[str, asyncio.Future]] = {}
        self._answers: OrderedDict[tuple[str, str], tuple[str, float, object]] = OrderedDict()
        self._remembered = remembered

    async def once(self, org_id: str, key: str, body_hash: str, produce: Callable[[], Awaitable[object]],
                   replay: Callable[[str], Awaitable[object | None]]) -> object:
        """The result of `produce` for the first use of (org, key); the same result afterwards."""
        if len(key) > MAX_KEY_CHARS:
            raise ApiError(400, f"Idempotency-Key is longer than {MAX_KEY_CHARS} characters",
                           param="Idempotency-Key")
        slot = (org_id, key)
        if slot in self._running:
            return await self._join(slot, body_hash)
        future = asyncio.get_running_loop().create_future()
        self._running[slot] = (body_hash, future)  # set before any await: later duplicates join
        try:
            result = await self._earlier(slot, body_hash, replay) or await produce()
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # a failure nobody joined must not be reported as unretrieved
            raise
        finally:
            del self._running[slot]
        future.set_result(result)
        self._remember(slot, body_hash, result)
        return result

    async def _join(self, slot: tuple[str, str], body_hash: str) -> object:
        running_hash, future = self._running[slot]
        if running_hash != body_hash:
            raise conflict("this Idempotency-Key is in use by a request with a different body")
        return await asyncio.shield(future)

    async def _earlier(self, slot: tuple[str, str], body_hash: str,
                       replay: Callable[[str], Awaitable[object | None]]) -> object | None:
        """The earlier answer for this key within the window, if there is one."""
        rows = await self._recorder.fetch(
            "SELECT request_hash, request_id, created_at_us FROM idempotency_keys"
            " WHERE org_id = ? AND idempotency_key = ?", slot)
        if not rows or rows[0][2] / 1e6 < time.time() - WINDOW_S:
            return None
        earlier_hash, request_id, _ = rows[0]
        if earlier_hash != body_hash:
            raise conflict("this Idempotency-Key was used within 24 hours for a different request body")
        remembered = self._answers.get(slot)
        answer = remembered[2] if remembered and remembered[0] == body_hash else await replay(request_id)
        if answer is None:
            raise conflict(f"this Idempotency-Key produced {request_id}, whose audio was not stored"
                           " and is no longer in memory; it cannot be replayed")
        return answer

    def _remember(self, slot: tuple[str, str], body_hash: str, result: object) -> None:
        self._answers[slot] = (body_hash, time.time(), result)
        self._answers.move_to_end(slot)
        while len(self._answers) > self._remembered:
            self._answers.popitem(last=False)
