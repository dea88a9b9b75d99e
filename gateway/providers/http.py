"""The HTTP plumbing adapters share: one pooled session, errors turned into UpstreamError."""

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import TYPE_CHECKING

import aiohttp
import msgspec
import yarl

from gateway.config import ProviderConfig
from gateway.edge.errors import UpstreamError
from gateway.jsonio import encode, loads
from gateway.accounts.redaction import forms_of, keys_sent, redact

if TYPE_CHECKING:  # the OpenTelemetry SDK is imported only when traces are on
    from gateway.telemetry.tracing import Tracing


ERROR_BODY_BYTES = 64 * 1024  # of an error answer, read to find its message
MESSAGE_CHARS = 600  # of an error message kept: the provider's words and our prefix


class Upstream(msgspec.Struct, frozen=True):
    """The pooled client session every adapter calls through, and who hears how long each
    provider took to its response headers: observe(provider, status, seconds). `for_provider`
    adds what one provider's configuration sends with every request (extra headers, query)."""

    session: aiohttp.ClientSession
    observe: Callable[[str, int, float], None]
    headers: Mapping[str, str] = {}
    query: Mapping[str, str] = {}
    tracing: "Tracing | None" = None  # a client span per call when traces are on (gateway.telemetry)

    def for_provider(self, config: ProviderConfig) -> "Upstream":
        return msgspec.structs.replace(self, headers=dict(config.headers), query=dict(config.query))

    def with_extras(self, headers: dict[str, str]) -> dict[str, str]:
        """`headers` over the provider's extra headers (the adapter's own, its key among them, win)."""
        return {**self.headers, **headers} if self.headers else headers


def timeout_for(config: ProviderConfig) -> aiohttp.ClientTimeout:
    # No total limit (streams may run long); the limit is on upstream silence.
    return aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=config.timeout_s)


async def post_json(upstream: Upstream, provider: str, url: str, body: dict,
                    headers: dict[str, str], timeout: aiohttp.ClientTimeout) -> aiohttp.ClientResponse:
    """POST `body` as JSON; the open 200 response, or UpstreamError describing the failure."""
    return await post(upstream, provider, url, encode(body), headers, timeout)


Refusal = Callable[[str, aiohttp.ClientResponse], Awaitable[UpstreamError]]


async def post(upstream: Upstream, provider: str, url: str | yarl.URL, data: bytes | AsyncIterator[bytes],
               headers: dict[str, str], timeout: aiohttp.ClientTimeout, *,
               refused: "Refusal | None" = None) -> aiohttp.ClientResponse:
    """POST `data` (bytes, or chunks produced while it is sent) to `url` (a yarl.URL is sent as it
    is encoded: a signed path must not be re-encoded); the open 200 response, or UpstreamError
    describing the failure (`refused` reads an error answer: `error_from` unless the protocol
    reads its own). The time to the response headers is observed here, not by aiohttp request
    tracing, which costs several coroutines per request."""
    return await _sent(upstream, Request("POST", provider, url, headers, timeout, refused or error_from, data=data))


async def get(upstream: Upstream, provider: str, url: str, headers: dict[str, str], timeout: aiohttp.ClientTimeout,
              params: Mapping[str, str] | None = None) -> aiohttp.ClientResponse:
    """GET `url` with `params` (beside the provider's extra query); the open 200 response, or
    UpstreamError as `post` raises it."""
    return await _sent(upstream, Request("GET", provider, url, headers, timeout, error_from, params=params or {}))


class Request(msgspec.Struct, frozen=True):
    """One call upstream: what `post` or `get` was asked."""

    method: str
    provider: str
    url: str | yarl.URL
    headers: dict[str, str]
    timeout: aiohttp.ClientTimeout
    refused: Refusal
    data: bytes | AsyncIterator[bytes] | None = None
    params: Mapping[str, str] = {}


async def _sent(upstream: Upstream, request: Request) -> aiohttp.ClientResponse:
    if upstream.tracing is None:
        return await _request(upstream, request)
    return await _traced(upstream.tracing, upstream, request)


async def _traced(tracing: "Tracing", upstream: Upstream, request: Request) -> aiohttp.ClientResponse:
    """`_request` as a client span (to the response headers), its trace context sent upstream."""
    span = tracing.attempt_span(request.provider, str(request.url))
    try:
        response = await _request(upstream, msgspec.structs.replace(
            request, headers=tracing.propagated(span, request.headers)))
    except UpstreamError as exc:
        tracing.ended_attempt(span, exc.status, exc.reason)
        raise
    except BaseException:
        tracing.ended_attempt(span, 0, "cancelled")
        raise
    tracing.ended_attempt(span, response.status)
    return response


async def _request(upstream: Upstream, request: Request) -> aiohttp.ClientResponse:
    started, provider, timeout = time.monotonic(), request.provider, request.timeout
    query = {**upstream.query, **request.params} if request.params else upstream.query
    try:
        response = await upstream.session.request(
            request.method, request.url, data=request.data, headers=upstream.with_extras(request.headers),
            params=query or None, timeout=timeout)
    except TimeoutError:
        raise UpstreamError(504, f"{provider} did not answer within {timeout.total or timeout.sock_read:g} s",
                            reason="timeout") from None
    except aiohttp.ClientError as exc:
        raise UpstreamError(502, f"{provider} connection failed: {type(exc).__name__}", reason="connection") from None
    upstream.observe(provider, response.status, time.monotonic() - started)
    if response.status >= 300:
        raise await request.refused(provider, response)
    return response


async def error_text(response: aiohttp.ClientResponse) -> str:
    """The start of an error answer's body ("" when it cannot be read); the connection released."""
    try:
        return (await response.read())[:ERROR_BODY_BYTES].decode(errors="replace")
    except (TimeoutError, aiohttp.ClientError):
        return ""
    finally:
        response.release()


async def error_from(provider: str, response: aiohttp.ClientResponse) -> UpstreamError:
    """An UpstreamError carrying the provider's status and its own message."""
    message = _error_message(await error_text(response)) or response.reason or "no message"
    return scrubbed(UpstreamError(response.status, f"{provider} returned {response.status}: {message}",
                                  retry_after=response.headers.get("Retry-After")), response)


def scrubbed(error: UpstreamError, response: aiohttp.ClientResponse) -> UpstreamError:
    """`error` without the key its request carried (providers quote the key they received), in
    any form, and without anything key-shaped; then cut short (after, so no part of a key is left)."""
    sent = response.request_info
    message = redact(error.message, forms_of(keys_sent(sent.headers, sent.url.query)))
    return UpstreamError(error.status, message[:MESSAGE_CHARS], retry_after=error.retry_after, reason=error.reason)


def _error_message(text: str) -> str:
    try:
        body = loads(text)
    except ValueError:
        return text.strip()
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return str(error.get("message", ""))
    return str(error or text)


async def read_json(provider: str, response: aiohttp.ClientResponse) -> dict:
    """The body of a 200 answer as a JSON object; a broken body is the provider's failure."""
    try:
        async with response:
            body = loads(await response.read())
    except TimeoutError:
        raise UpstreamError(504, f"{provider} stopped answering mid-response") from None
    except (aiohttp.ClientError, ValueError) as exc:
        raise UpstreamError(502, f"{provider} sent a broken response: {type(exc).__name__}") from None
    if not isinstance(body, dict):
        raise UpstreamError(502, f"{provider} sent a response that is not a JSON object")
    return body
