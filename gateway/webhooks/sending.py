"""Sending one delivery: signed (gateway.webhooks.signing), to addresses checked against SSRF
(gateway.webhooks.destinations) and connected to exactly, within a total timeout, no redirect
followed, no proxy from the environment, and at most `max_response_bytes` of the answer read."""

import contextlib
import socket
import time

import aiohttp
import msgspec
from aiohttp.abc import AbstractResolver, ResolveResult

from gateway.webhooks import destinations, signing
from gateway.webhooks.destinations import DestinationRefused, Policy

CHUNK = 16_384  # bytes of an answer read at a time


class Delivery(msgspec.Struct, frozen=True):
    status: int  # the receiver's HTTP status; 0: no answer
    error: str = ""  # why it failed, fit to show the org; "" for a 2xx
    latency_ms: int = 0

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


class CheckedResolver(AbstractResolver):
    """Resolves only to addresses the policy allows: the connection goes where the check looked."""

    def __init__(self, policy: Policy) -> None:
        self._policy = policy

    async def resolve(self, host: str, port: int = 0, family: int = socket.AF_INET) -> list[ResolveResult]:
        addresses = await destinations.resolve(host, port, self._policy)
        return [ResolveResult(hostname=host, host=address, port=port, family=_family(address), proto=0,
                              flags=socket.AI_NUMERICHOST) for address in addresses]

    async def close(self) -> None:
        return None


def _family(address: str) -> int:
    return socket.AF_INET6 if ":" in address else socket.AF_INET


class Sender:
    """One per process (it pools connections). Each delivery goes only to addresses
    destinations.resolve checked, by the session's resolver, so the connection is made to exactly
    those (TLS SNI and Host still name the host); literal addresses aiohttp never resolves are
    checked by check_url at each send. No proxy from the environment (trust_env=False)."""

    def __init__(self, policy: Policy, *, timeout_s: float = 10.0, max_response_bytes: int = 65_536) -> None:
        self._policy, self._timeout_s, self._max_bytes = policy, timeout_s, max_response_bytes
        connector = aiohttp.TCPConnector(resolver=CheckedResolver(policy), use_dns_cache=False, limit=64)
        self._session = aiohttp.ClientSession(connector=connector, trust_env=False,
                                              timeout=aiohttp.ClientTimeout(total=timeout_s))

    async def send(self, url: str, secret: str, message_id: str, body: bytes, timestamp: int) -> Delivery:
        """POST `body` signed, within the total timeout, no redirect followed. Never raises for the
        destination or the network: those are a Delivery with status 0 and why. ValueError only
        for a malformed secret (the caller's bug, not the receiver's)."""
        started = time.monotonic()
        try:
            destinations.check_url(url, self._policy)
            status, error = await self._post(url, body, signing.headers(secret, message_id, timestamp, body))
        except DestinationRefused as exc:
            status, error = 0, f"refused: {exc}"
        except TimeoutError:
            status, error = 0, f"timed out after {self._timeout_s:g} s"
        except aiohttp.ClientError as exc:
            status, error = 0, _client_error(exc)
        return Delivery(status, error, int((time.monotonic() - started) * 1000))

    async def _post(self, url: str, body: bytes, headers: dict[str, str]) -> tuple[int, str]:
        async with self._session.post(url, data=body, headers=headers, allow_redirects=False) as answer:
            await _drain(answer, self._max_bytes)
            if 200 <= answer.status < 300:
                return answer.status, ""
            if 300 <= answer.status < 400:
                return answer.status, f"HTTP {answer.status}: redirects are not followed"
            return answer.status, f"HTTP {answer.status}"

    async def close(self) -> None:
        await self._session.close()


async def _drain(answer: aiohttp.ClientResponse, limit: int) -> None:
    """Read at most `limit` bytes of the answer, for the connection's sake only: its status has
    decided already, so a body that breaks or stalls (until the total timeout) changes nothing.
    Unless it ended, the connection is closed, the rest never read."""
    read = 0
    with contextlib.suppress(aiohttp.ClientError, TimeoutError):
        while read < limit:
            chunk = await answer.content.read(min(CHUNK, limit - read))
            if not chunk:
                return
            read += len(chunk)
    answer.close()


def _client_error(exc: aiohttp.ClientError) -> str:
    """A network failure in a few words, for the org."""
    if isinstance(exc, aiohttp.ClientConnectorError):
        if isinstance(exc.os_error, ConnectionRefusedError):
            return "connection refused"
        return f"cannot connect: {exc.os_error}"[:300]
    return f"connection failed: {type(exc).__name__}: {exc}"[:300]
