"""A routed request's attempts: each provider of its plan in turn until one answers.

A provider that fails in a way another could cure (`UpstreamError.fails_over`: a connection
error, a timeout, 429 or 5xx) counts against its circuit and the next is tried, up to
`[routing] max_attempts` providers and until `deadline_s` after the request began; any other
failure is the request's. Only the answer is charged, at the price of the provider that gave it
(its `Resolved`); every attempt is recorded in the request's ledger event (`Caller.attempts`).
What an attempt holds before it is made, and the record of a request no provider answered, are
billing's, reached through `Services.attempt_billing` (the contract: gateway.routing.attempts).
A stream is "answered" once its provider has accepted it: after that nothing fails over, since
what the client has been sent cannot be taken back.
"""

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

import msgspec

from gateway.catalogue import Resolved
from gateway.accounts import key_policy
from gateway.edge.errors import ApiError, UpstreamError
from gateway.resolution import Capability, Served, servers
from gateway.routing import preferences
from gateway.routing.router import Plan
from gateway.services import Caller, Services
from ledger.events import Attempt

P = TypeVar("P")
T = TypeVar("T")


class Answered(msgspec.Struct, Generic[P, T], frozen=True):
    """The provider that answered, the key it was called with ("": the gateway's), its answer."""

    served: Served[P]
    api_key: str
    answer: T

    @property
    def byok(self) -> bool:
        return bool(self.api_key)


async def plan(services: Services, body: dict, model: str, capability: Capability[P],
               usable: Callable[[list[Served[P]]], list[Served[P]]] | None = None) -> Plan[Served[P]]:
    """The providers a request for `model` may try, in order (those `usable` keeps, when given:
    it raises the request's 400 when it keeps none); takes the `provider` object off `body`
    (it is the gateway's, not the provider's). 400/501 as `resolution.servers`."""
    wanted = preferences.take(body)
    candidates = servers(services, model, capability)
    return await services.router.plan(usable(candidates) if usable else candidates, wanted, model)


async def routed(services: Services, caller: Caller, body: dict, model: str, capability: Capability[P],
                 call: Callable[[Served[P], str], Awaitable[T]], *, path: str, ceiling: Callable[[Resolved], int],
                 stream: bool = False, usable: Callable[[list[Served[P]]], list[Served[P]]] | None = None
                 ) -> Answered[P, T]:
    """`plan`, then `answer`: the whole of a request that needs nothing between the two."""
    route = await plan(services, body, model, capability, usable)
    return await answer(services, caller, route, call, path=path, model=model, ceiling=ceiling, stream=stream)


async def hold_attempt(services: Services, caller: Caller, path: str, model: Resolved,
                       ceiling: Callable[[Resolved], int]) -> str:
    """The key to call `model`'s provider with: the organization's own ("" for the gateway's, and
    the request then holds its worst case on `model`, `ceiling(model)`, or is refused with 402).
    Billing's to decide (`Services.attempt_billing`)."""
    return await services.attempt_billing.hold_attempt(services, caller, path, model, ceiling)


async def answer(services: Services, caller: Caller, route: Plan[Served[P]],
                 call: Callable[[Served[P], str], Awaitable[T]], *, path: str, model: str,
                 ceiling: Callable[[Resolved], int], stream: bool = False) -> Answered[P, T]:
    """`call(served, api_key)` on each provider of `route` until one answers, each paid attempt
    holding its worst case first (`ceiling`, on that provider's prices); when none answers, the
    last failure is recorded (not charged, its holds released) and raised as the client's error."""
    candidates = await key_policy.permitted(services, caller, path, model, route.candidates)
    config, circuits, loop = services.config.routing, services.router.circuits, asyncio.get_running_loop()
    deadline = loop.time() + config.deadline_s - (time.monotonic() - caller.started)
    bounded = len(candidates) > 1  # the deadline bounds failing over; one provider has its own timeout
    tried: list[Attempt] = caller.attempts
    last: tuple[Served[P], UpstreamError] | None = None
    for served in candidates:
        provider = served.model.provider_id
        if len(tried) >= config.max_attempts or (last and loop.time() >= deadline):
            break
        # Before a probe is claimed: a 402 claims none.
        api_key = await hold_attempt(services, caller, path, served.model, ceiling)
        if route.respect_circuits and not circuits.acquire(provider):
            continue  # another request is probing it
        if last is not None:
            _failing_over(services, caller, last[0].model.provider_id, last[1])
        caller.facts.provider = provider
        started = time.monotonic()
        try:
            attempt = call(served, api_key)
            result = await (_within(deadline, attempt, provider, config.deadline_s) if bounded else attempt)
        except UpstreamError as exc:
            _tried(services, tried, provider, started, exc)
            if not exc.fails_over:
                circuits.release(provider)
                raise await _given_up(services, caller, path, served.model, model, exc, stream) from None
            await circuits.failed(provider, exc.retry_after if exc.status == 429 else None)
            last = (served, exc)
            continue
        except BaseException:
            circuits.release(provider)  # cancelled (the client left): the probe, if it was one, is over
            raise
        _tried(services, tried, provider, started)
        await circuits.succeeded(provider)
        return Answered(served, api_key, result)
    if last is None:  # every provider left was being probed by another request
        raise ApiError(503, f"every provider of model {model!r} is cooling after failures; retry shortly",
                       type="service_unavailable", headers={"Retry-After": "1"})
    raise await _given_up(services, caller, path, last[0].model, model, last[1], stream)


async def _given_up(services: Services, caller: Caller, path: str, model: Resolved, requested: str,
                    failure: UpstreamError, stream: bool) -> ApiError:
    """The request's failure on `model`'s provider, recorded by billing (`Services.attempt_billing`)."""
    return await services.attempt_billing.attempt_failed(services, caller, path, model, requested, failure,
                                                         stream=stream)


async def _within(deadline: float, call: Awaitable[T], provider: str, deadline_s: float) -> T:
    try:
        async with asyncio.timeout_at(deadline):
            return await call
    except TimeoutError:
        raise UpstreamError(504, f"{provider} did not answer within the routing deadline ({deadline_s:g} s)",
                            reason="deadline") from None


def _failing_over(services: Services, caller: Caller, provider: str, failure: UpstreamError) -> None:
    """Note that the request left `provider` for the next, in its log line and the metrics."""
    caller.facts.failed_over = [*(caller.facts.failed_over or ()), provider]
    services.metrics.observe_failover(provider, failure.reason)


def _tried(services: Services, tried: list[Attempt], provider: str, started: float,
           failure: UpstreamError | None = None) -> None:
    """Note an attempt for the ledger event and the metrics."""
    latency_ms = int((time.monotonic() - started) * 1000)
    if failure is None:
        tried.append(Attempt(provider, 200, latency_ms))
    else:
        tried.append(Attempt(provider, failure.status, latency_ms, failure.message))
    services.metrics.observe_attempt(provider, "ok" if failure is None else failure.reason)
