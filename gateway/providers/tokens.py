"""Short-lived credentials a cloud issues (a Google access token, an Entra ID token, AWS's
temporary keys), kept while they are good and renewed before they lapse: once for every request
in between, by one caller at a time, never once per request; and `names_itself`, how a cloud's
machine is told apart (its DMI tables) when looking for credentials without the network."""

import asyncio
import time
from pathlib import Path
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

T = TypeVar("T")

# Renewed this long before it lapses, so a request signed just before the end is still honoured
# upstream (google-auth and the AWS SDKs use a few minutes too).
RENEW_BEFORE_S = 300.0


class Lapsing(Generic[T]):
    """A credential and the monotonic instant it lapses."""

    __slots__ = ("lapses_at", "value")

    def __init__(self, value: T, lapses_at: float) -> None:
        self.value = value
        self.lapses_at = lapses_at

    @classmethod
    def lasting(cls, value: T, seconds: float) -> "Lapsing[T]":
        """`value`, good for `seconds` from now."""
        return cls(value, time.monotonic() + seconds)


class RenewedCredential(Generic[T]):
    """`fetch` called when no credential is held or the one held lapses within RENEW_BEFORE_S
    (or within half its life, for one issued for less than twice that). Concurrent callers wait
    for the one fetch under way rather than start their own."""

    def __init__(self, fetch: Callable[[], Awaitable[Lapsing[T]]]) -> None:
        self._fetch = fetch
        self._held: Lapsing[T] | None = None
        self._renew_at = 0.0
        # One fetch at a time: a burst of requests at expiry would otherwise each ask the issuer.
        self._lock = asyncio.Lock()

    async def get(self) -> T:
        """A credential that is good now and for a while yet."""
        if self._held is not None and time.monotonic() < self._renew_at:
            return self._held.value
        async with self._lock:
            if self._held is None or time.monotonic() >= self._renew_at:
                self._held = await self._fetch()
                now = time.monotonic()
                life = max(0.0, self._held.lapses_at - now)
                self._renew_at = now + max(life - RENEW_BEFORE_S, life / 2)
            return self._held.value

    def forget(self) -> None:
        """Drop the credential held (the issuer refused it), so the next `get` fetches anew."""
        self._held = None


def names_itself(path: Path, vendor: str) -> bool:
    """Whether the machine's `path` (a DMI table: /sys/class/dmi/id/...) names `vendor`."""
    try:
        return vendor in path.read_text()
    except OSError:
        return False
