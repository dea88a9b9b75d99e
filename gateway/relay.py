"""The one control flow of every streamed, billed response (chat chunks or Anthropic events).

A stream that completes is billed on the usage the provider reports, then finished. A client
that leaves is billed (status 499) for what it was sent, and the upstream request is cancelled.
A provider that fails mid-way is recorded, not charged, and the client told in the stream.
"""

import abc
import asyncio

from aiohttp import web

from gateway.errors import UpstreamError
from gateway.providers.base import ChatStream

SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
               "X-Accel-Buffering": "no"}


class BilledRelay(abc.ABC):
    upstream: ChatStream  # anything with aclose(); subclasses iterate it in _relay

    async def send(self, http_request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers=SSE_HEADERS)
        await response.prepare(http_request)
        try:
            await self._relay(response)
        except UpstreamError as exc:
            await self._upstream_failed(response, exc)
            return response
        except (ConnectionError, asyncio.CancelledError):
            await asyncio.shield(self._bill(499, estimated=True))  # the client went away
            raise
        finally:
            await self.upstream.aclose()
        billed = await self._bill(200, estimated=self._usage_unreported())
        await self._finish(response, billed)
        return response

    @abc.abstractmethod
    async def _relay(self, response: web.StreamResponse) -> None:
        """Write each upstream chunk or event to the client as it arrives."""

    @abc.abstractmethod
    def _usage_unreported(self) -> bool:
        """True when the provider never reported usage, so it must be estimated."""

    @abc.abstractmethod
    async def _bill(self, status: int, *, estimated: bool) -> object:
        """Record the request in the ledger; returns what `_finish` reports to the client."""

    @abc.abstractmethod
    async def _finish(self, response: web.StreamResponse, billed: object) -> None:
        """Send the closing frames, carrying what was charged, and end the response."""

    @abc.abstractmethod
    async def _upstream_failed(self, response: web.StreamResponse, exc: UpstreamError) -> None:
        """Record the failure (not charged) and tell the client in the stream."""
