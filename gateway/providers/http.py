"""The HTTP plumbing adapters share: one pooled session, errors turned into UpstreamError."""

import asyncio
from collections.abc import AsyncIterator

import aiohttp

from gateway.config import ProviderConfig
from gateway.errors import UpstreamError
from gateway.jsonio import encode, loads
from gateway.logs import mask_secrets


def timeout_for(config: ProviderConfig) -> aiohttp.ClientTimeout:
    # No total limit (streams may run long); the limit is on upstream silence.
    return aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=config.timeout_s)


async def post_json(session: aiohttp.ClientSession, provider: str, url: str, body: dict,
                    headers: dict[str, str], timeout: aiohttp.ClientTimeout) -> aiohttp.ClientResponse:
    """POST `body` as JSON; the open 200 response, or UpstreamError describing the failure."""
    return await post(session, provider, url, encode(body), headers, timeout)


async def post(session: aiohttp.ClientSession, provider: str, url: str, data: bytes | AsyncIterator[bytes],
               headers: dict[str, str], timeout: aiohttp.ClientTimeout) -> aiohttp.ClientResponse:
    """POST `data` (bytes, or chunks produced while it is sent); the open 200 response, or
    UpstreamError describing the failure."""
    try:
        response = await session.post(url, data=data, headers=headers, timeout=timeout,
                                      trace_request_ctx={"provider": provider})  # for the metrics
    except asyncio.TimeoutError:
        raise UpstreamError(504, f"{provider} did not answer within {timeout.total or timeout.sock_read:g} s") from None
    except aiohttp.ClientError as exc:
        raise UpstreamError(502, f"{provider} connection failed: {type(exc).__name__}") from None
    if response.status >= 300:
        raise await error_from(provider, response)
    return response


async def error_from(provider: str, response: aiohttp.ClientResponse) -> UpstreamError:
    """An UpstreamError carrying the provider's status and its own message."""
    try:
        text = (await response.read())[:2000].decode(errors="replace")
    except (aiohttp.ClientError, asyncio.TimeoutError):
        text = ""
    finally:
        response.release()
    message = _error_message(text) or response.reason or "no message"
    return UpstreamError(response.status, f"{provider} returned {response.status}: {mask_secrets(message)}",
                         retry_after=response.headers.get("Retry-After"))


def _error_message(text: str) -> str:
    try:
        body = loads(text)
    except ValueError:
        return text.strip()[:500]
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return str(error.get("message", ""))[:500]
    return str(error or text)[:500]


async def read_json(provider: str, response: aiohttp.ClientResponse) -> dict:
    """The body of a 200 answer as a JSON object; a broken body is the provider's failure."""
    try:
        async with response:
            body = loads(await response.read())
    except asyncio.TimeoutError:
        raise UpstreamError(504, f"{provider} stopped answering mid-response") from None
    except (aiohttp.ClientError, ValueError) as exc:
        raise UpstreamError(502, f"{provider} sent a broken response: {type(exc).__name__}") from None
    if not isinstance(body, dict):
        raise UpstreamError(502, f"{provider} sent a response that is not a JSON object")
    return body
