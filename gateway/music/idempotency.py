"""Idempotency-Key for POST /v1/music: one generation, one charge, however often a client retries
and on whichever replica the retry lands.

Keys are scoped to the organization. A request claims its key in the ledger, in the unit that
holds its price, before it calls upstream; the ledger refuses a second claim of a key the org
still holds, from any process or replica. What a request finds under its key decides what it
does (`next_step`):

- nothing: it claims the key and generates;
- a running claim with the same body: it waits for that request (polling the ledger with a short
  back-off, at most its own claim's lease), then acts on what it finds; a duplicate in the same
  process joins the first in memory instead, and shares its outcome, error included;
- a success within 24 hours with the same body: the first response, replayed from this process's
  memory, or rebuilt from the ledger and the bucket (audio that was never stored, storage inline
  or none, cannot be rebuilt on another replica or after a restart: 409);
- another body: 409 `idempotency_conflict`;
- a success older than 24 hours, or a claim that lapsed (its lease, the claimer's upstream timeout
  plus a margin, passed without a settle: its replica died): it claims the key anew, releasing the
  old claim in the same unit (of several racing to do so, the ledger admits one).

A request that fails is not charged and releases its claim in the unit that records it, so a retry
with the same key, or a duplicate waiting for it in another process, makes an attempt of its own. A generation that
outlives its own lease is answered 504 and not charged, since another replica may by then have
taken the key over: never two charges for one key. A dead replica's claim blocks its key until its
lease passes (duplicates wait, then take the key over).
"""

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Generic, Literal, NamedTuple, Protocol, TypeVar

import msgspec

from gateway.edge.errors import ApiError
from ledger import queries
from ledger.events import Event, IdempotencyKeyClaimed, IdempotencyKeyReleased
from ledger.recorder import Recorder

WINDOW_US = 24 * 3600 * 1_000_000
MAX_KEY_CHARS = 255
LEASE_MARGIN_S = 60.0  # beyond the upstream timeout: storing the audio and recording the charge
FIRST_POLL_S, LONGEST_POLL_S = 0.05, 1.0

Step = Literal["claim", "wait", "replay"]


def conflict(message: str) -> ApiError:
    return ApiError(409, message, type="idempotency_conflict", param="Idempotency-Key")


class KeyTaken(Exception):
    """Another request claimed the key between our look and our claim."""


class Answer(Protocol):
    @property
    def request_id(self) -> str: ...


A = TypeVar("A", bound=Answer)  # what a request under a key produces, and duplicates receive


class Use(NamedTuple):
    """A key's row in the ledger: a running claim (running_until_us > 0) or a settled success."""

    request_hash: str
    request_id: str
    created_at_us: int
    running_until_us: int

    def lapsed(self, now_us: int) -> bool:
        """A claim past its lease, or a success past its 24 hours: the key may be claimed anew."""
        if self.running_until_us:
            return self.running_until_us < now_us
        return self.created_at_us < now_us - WINDOW_US


def next_step(use: Use | None, body_hash: str, now_us: int) -> Step:
    """What a request with `body_hash` does about its key's current use (see the module doc)."""
    if use is None or use.lapsed(now_us):
        return "claim"
    if use.request_hash != body_hash:
        raise conflict("this Idempotency-Key is in use by a request with a different body" if use.running_until_us
                       else "this Idempotency-Key was used within 24 hours for a different request body")
    return "wait" if use.running_until_us else "replay"


class Claim(msgspec.Struct, frozen=True):
    """The key a request takes before its upstream call, and the lapsed use it replaces, if any."""

    key: str
    request_hash: str
    lease_s: float
    replaces: str = ""  # the request id of a lapsed use
    deadline: float = 0.0  # time.monotonic() by which the request must have settled

    def events(self, request_id: str) -> list[Event]:
        """The claim, released from a lapsed use in the same unit."""
        claimed = IdempotencyKeyClaimed(idempotency_key=self.key, request_hash=self.request_hash,
                                        request_id=request_id, lease_us=round(self.lease_s * 1_000_000))
        return [self.released(self.replaces), claimed] if self.replaces else [claimed]

    def released(self, request_id: str) -> IdempotencyKeyReleased:
        return IdempotencyKeyReleased(idempotency_key=self.key, request_id=request_id)

    def check_lease(self) -> None:
        """504 (and no charge) for a generation that outlived its lease: the key may be another's now."""
        if time.monotonic() > self.deadline:
            raise ApiError(504, f"the generation took longer than its Idempotency-Key lease ({self.lease_s:g} s);"
                                " it was not charged, retry with the same key", type="gateway_error",
                           code="gateway_timeout")


class Patience:
    """A duplicate's wait for another request: growing pauses, at most `budget_s` in all."""

    def __init__(self, budget_s: float) -> None:
        self._deadline = time.monotonic() + budget_s
        self._pause = FIRST_POLL_S

    async def pause(self) -> None:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise conflict("this Idempotency-Key is held by a request that is still running; retry later")
        await asyncio.sleep(min(self._pause, left))
        self._pause = min(self._pause * 2, LONGEST_POLL_S)


class IdempotencyKeys(Generic[A]):
    def __init__(self, recorder: Recorder, upstream_timeout_s: float = 240.0, remembered: int = 64) -> None:
        self._recorder = recorder
        self._lease_s = upstream_timeout_s + LEASE_MARGIN_S
        self._running: dict[tuple[str, str], tuple[str, asyncio.Future[A]]] = {}
        self._answers: OrderedDict[tuple[str, str], A] = OrderedDict()  # by (org, request id)
        self._remembered = remembered

    async def once(self, org_id: str, key: str, body_hash: str, produce: Callable[[Claim], Awaitable[A]],
                   replay: Callable[[str], Awaitable[A | None]]) -> A:
        """The result of `produce` under a claim of (org, key); the first result to duplicates."""
        if len(key) > MAX_KEY_CHARS:
            raise ApiError(400, f"Idempotency-Key is longer than {MAX_KEY_CHARS} characters",
                           param="Idempotency-Key")
        slot = (org_id, key)
        if slot in self._running:
            return await self._join(slot, body_hash)
        future: asyncio.Future[A] = asyncio.get_running_loop().create_future()
        self._running[slot] = (body_hash, future)  # set before any await: later duplicates join
        try:
            result = await self._first(slot, body_hash, produce, replay)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # a failure nobody joined must not be reported as unretrieved
            raise
        finally:
            del self._running[slot]
        future.set_result(result)
        self._remember(org_id, result)
        return result

    async def _join(self, slot: tuple[str, str], body_hash: str) -> A:
        running_hash, future = self._running[slot]
        if running_hash != body_hash:
            raise conflict("this Idempotency-Key is in use by a request with a different body")
        return await asyncio.shield(future)

    async def _first(self, slot: tuple[str, str], body_hash: str, produce: Callable[[Claim], Awaitable[A]],
                     replay: Callable[[str], Awaitable[A | None]]) -> A:
        """Generate under a new claim of the key, or the answer of the request that holds it."""
        patience = Patience(self._lease_s)
        while True:
            use = await self._use(slot)
            step = next_step(use, body_hash, time.time_ns() // 1000)
            if step == "replay" and use is not None:  # a replay always has a use; this tells the checker
                return await self._replayed(slot[0], use.request_id, replay)
            if step == "claim":
                claim = Claim(slot[1], body_hash, self._lease_s, use.request_id if use else "",
                              time.monotonic() + self._lease_s)
                try:
                    return await produce(claim)
                except KeyTaken:
                    pass  # look again: it is running now, or already released
            await patience.pause()

    async def _use(self, slot: tuple[str, str]) -> Use | None:
        use = await queries.key_use(self._recorder, *slot)
        return Use(*use) if use else None

    async def _replayed(self, org_id: str, request_id: str,
                        replay: Callable[[str], Awaitable[A | None]]) -> A:
        answer = self._answers.get((org_id, request_id)) or await replay(request_id)
        if answer is None:
            raise conflict(f"this Idempotency-Key produced {request_id}, whose audio was not stored"
                           " and is not in this process's memory; it cannot be replayed")
        return answer

    def _remember(self, org_id: str, result: A) -> None:
        slot = (org_id, result.request_id)
        self._answers[slot] = result
        self._answers.move_to_end(slot)
        while len(self._answers) > self._remembered:
            self._answers.popitem(last=False)
