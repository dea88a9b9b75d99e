"""The one control flow of every streamed, billed response (chat chunks or Anthropic events).

A stream that completes is billed on the usage the provider reports, then finished. A client
that leaves is billed (status 499) for what it was sent, and the upstream request is cancelled.
A provider that fails mid-way (an error, a malformed chunk, a stream ended without its end
marker) is recorded, not charged, and the client told in the stream. A charge the ledger
cannot record (gateway.billing.charging.commit: withdrawn, refused, or the database away before
COMMIT) ends the stream with an error event saying nothing was charged, never with a silent cut;
one whose COMMIT went unanswered stands, and the stream ends as charged.

The billed streams ("relays") are BilledRelay's subclasses, one per API family's `streams`
module: chat's ChatRelay (and completions' CompletionRelay), MessagesRelay, ResponsesRelay.
(Speech is billed on its input: gateway.audio.speech.SpeechRelay has its own flow.)
"""

import abc
import asyncio
import math
from typing import Generic, Protocol, TypeVar

import structlog
from aiohttp import web

from gateway.billing.charging import bill, despite_cancellation, keeps_text, record_failure
from gateway.billing.pricing import Cost
from gateway.billing.reservations import release_all
from gateway.providers.usage import Usage
from gateway.catalogue import Resolved
from gateway.edge.errors import ApiError, UpstreamError, ledger_unavailable
from gateway.jsonio import encode
from gateway.content import KeptText
from gateway.services import Caller, Services
from ledger.recorder import AppendRejected, LedgerUnavailable

SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
               "X-Accel-Buffering": "no"}
# What the ledger raises when a request cannot be recorded (a closing writer is unavailable too).
UNRECORDED = (LedgerUnavailable, AppendRejected)

log = structlog.get_logger("gateway.streaming")


def estimate_prompt_tokens(prompt: list[dict]) -> int:
    """Used only when upstream never reported usage: about four characters a token of the
    retained conversation (`{"role", "content"}` messages; structured content as JSON)."""
    chars = sum(len(m["content"]) if isinstance(m["content"], str) else len(encode(m["content"] or ""))
                for m in prompt)
    return math.ceil(chars / 4)


def unrecorded_error(exc: Exception) -> ApiError:
    """What the client hears when its stream's charge could not be recorded."""
    if isinstance(exc, AppendRejected):
        return ApiError(500, "the gateway could not record this request; nothing was charged",
                        type="server_error")
    return ledger_unavailable("this answer's charge was not recorded")


class RelayedRequest(Protocol):
    @property
    def model(self) -> str:
        """The model as the client named it."""


class UpstreamStream(Protocol):
    """What a billed stream reads from: a provider's stream of chunks or events, which the relay
    iterates (its own type says of what) and closes."""

    async def aclose(self) -> None:
        """Stop reading and abandon the upstream request."""


U = TypeVar("U", bound=UpstreamStream)


class BilledRelay(abc.ABC, Generic[U]):
    """Billing rule: a completed stream is billed on the usage the provider reports (estimated
    when it reports none). A client that leaves is billed (499) for the output delivered so far
    plus an estimated prompt, and the upstream request is cancelled. A provider failure is
    recorded, not charged."""

    route: str  # the route its requests are recorded under

    def __init__(self, services: Services, caller: Caller, request: RelayedRequest, model: Resolved,
                 upstream: U, prompt: list[dict], byok: bool) -> None:
        self.services, self.caller, self.request, self.model = services, caller, request, model
        self.upstream, self.prompt, self.byok = upstream, prompt, byok  # prompt: as retained
        self.usage: Usage | None = None  # as the provider reported it
        self.delivered = 0  # completion tokens sent to the client
        # The completion as sent, retained with the prompt: bounded, and nothing under retention none.
        self.text = KeptText(keeps_text(services, caller))

    async def send(self, http_request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers=SSE_HEADERS)
        await response.prepare(http_request)
        try:
            await self._relay(response)
        except UpstreamError as exc:
            await self._upstream_failed(response, exc)
            return response
        except (ConnectionError, asyncio.CancelledError):
            await despite_cancellation(self._bill(499, estimated=True))  # the client went away
            raise
        finally:
            await self.upstream.aclose()
        try:
            usage, cost = await self._bill(200, estimated=self.usage is None)
        except UNRECORDED as exc:  # nothing was written, nor will be (gateway.billing.charging.commit)
            release_all(self.services, self.caller, self.route, exc)
            await self._end_with(response, unrecorded_error(exc))
            return response
        await self._finish(response, usage, cost)
        return response

    async def _bill(self, status: int, *, estimated: bool) -> tuple[Usage, Cost]:
        """Record the request in the ledger; what was billed, for `_finish` to report."""
        usage = self.usage if self.usage is not None and not estimated else \
            Usage(estimate_prompt_tokens(self.prompt), self.delivered)
        cost = await bill(self.services, self.caller, self.route, self.model, usage, self._kept(usage),
                          byok=self.byok, status=status, stream=True)
        return usage, cost

    def _kept(self, usage: Usage) -> dict:
        """The text the content store keeps of this request, when the organization keeps text."""
        return self.text.marked({"request": self.prompt, "response": [self.text.text()]})

    async def _upstream_failed(self, response: web.StreamResponse, exc: UpstreamError) -> None:
        """Record the failure (not charged) and tell the client in the stream."""
        try:
            await record_failure(self.services, self.caller, self.route, self.model, exc, stream=True)
        except UNRECORDED as failure:  # the client still hears what failed
            log.warning("stream_failure_unrecorded", error=repr(failure), upstream_error=exc.message)
        await self._end_with(response, exc.to_api_error(self.model.provider_id, self.request.model))

    async def _end_with(self, response: web.StreamResponse, error: ApiError) -> None:
        try:
            await response.write(self._error_frames(error))
            await response.write_eof()
        except ConnectionError:
            pass  # the client left too; what happened is already recorded

    @abc.abstractmethod
    async def _relay(self, response: web.StreamResponse) -> None:
        """Write each upstream chunk or event to the client as it arrives."""

    @abc.abstractmethod
    async def _finish(self, response: web.StreamResponse, usage: Usage, cost: Cost) -> None:
        """Send the closing frames, carrying what was charged, and end the response."""

    @abc.abstractmethod
    def _error_frames(self, error: ApiError) -> bytes:
        """The frames that end the stream with `error`, in the route's own format."""
