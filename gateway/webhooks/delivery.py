"""Delivering alerts, at least once and in order, from the ledger.

One process at a time delivers (its turn at the job, ledger.turns.Turn: when it dies, the
database ends its turn and another gateway process takes over). Each endpoint has a durable
cursor, a version of its org's stream: each look reads the events after it, derives their alerts
(gateway.webhooks.alerts) and sends them one by one, each attempt recorded in the ledger. A
delivered attempt moves the cursor past its event in the same write, so a crash between a send and
its record sends that message again, under the same id, and never skips one. A failure stops the
endpoint's queue (order) until its retry, with backoff, for `retry_for_s`; then it is disabled.
Endpoints are delivered to concurrently, a few at a time, so one slow receiver delays only itself.
"""

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

import msgspec

from gateway.accounts.sealing import SealingError
from gateway.config import WebhooksConfig
from gateway.webhooks import alerts, backoff
from gateway.webhooks.alerts import Due, Standing
from gateway.webhooks.sending import Delivery, Sender
from gateway.webhooks.subscriptions import Webhooks, secret_name
from ledger import batch_queries, queries, webhooks
from ledger.events import Event, WebhookAttempted, WebhookDisabled, WebhookPassed
from ledger.recorder import Append, LedgerError, Recorded, Recorder
from ledger.webhooks import Endpoint, Happened

log = logging.getLogger("gateway.webhooks")

JOB = "webhooks"
WINDOW = 2_000  # events judged per look at an endpoint
PASS_SPAN = 500  # events that raised nothing for an endpoint, after which its cursor is moved over them
CONCURRENCY = 16  # endpoints delivered to at once
PAGE = 500  # endpoints read at a time
TURN_RETRY_S = 2.0  # how often a process without the turn asks for it (a PostgreSQL connection each time)
encode = msgspec.json.Encoder().encode


class Deliverer:
    def __init__(self, recorder: Recorder, append: Callable[[Append], Awaitable[list[Recorded]]], sender: Sender,
                 hooks: Webhooks, config: WebhooksConfig) -> None:
        self._recorder, self._append, self._sender = recorder, append, sender
        self._hooks, self._config = hooks, config
        self._judged: dict[str, tuple[int, int]] = {}  # endpoint -> (cursor, head) it raised nothing between
        # endpoint -> (version, its org's money there) where the last look ended: events are
        # immutable, so that money stays true of that version for good
        self._standings: dict[str, tuple[int, Standing]] = {}
        self._gate = asyncio.Semaphore(CONCURRENCY)

    async def run(self) -> None:
        """Forever: wait for the turn, then deliver while it lasts."""
        while True:
            turn = await self._take_turn()
            if turn is None:
                await asyncio.sleep(TURN_RETRY_S)
                continue
            try:
                while await turn.held():
                    await self._look()
                    await self._rest()
            finally:
                await turn.release()

    async def _take_turn(self):
        try:
            return await self._recorder.take_turn(JOB)
        except LedgerError as exc:
            log.warning("webhook delivery cannot take its turn: %s", exc)
            return None

    async def _rest(self) -> None:
        with contextlib.suppress(TimeoutError):  # the bell: this process just queued a test
            await asyncio.wait_for(self._hooks.bell.wait(), self._config.poll_interval_s)
        self._hooks.bell.clear()

    async def _look(self) -> None:
        """One round over the endpoints due; the ledger away is logged and tried again next round."""
        try:
            await self.round()
        except LedgerError as exc:
            log.warning("webhook delivery paused: the ledger is unavailable: %s", exc)
        except Exception:
            log.exception("webhook delivery round failed; the next round tries again")

    async def round(self) -> int:
        """Deliver what each due endpoint has waiting, once; how many attempts were made."""
        made, after, now = 0, "", self._recorder.clock()
        while due := await webhooks.due(self._recorder, now, after, PAGE):
            made += sum(await asyncio.gather(*(self._guarded(endpoint, head) for endpoint, head in due)))
            after = due[-1][0].webhook_id
        return made

    async def _guarded(self, endpoint: Endpoint, head: int) -> int:
        async with self._gate:
            return await self.endpoint(endpoint, head)

    async def endpoint(self, endpoint: Endpoint, head: int) -> int:
        """Send the endpoint's waiting messages in order until one fails; attempts made."""
        dues, judged_to = await self._waiting(endpoint, head)
        made, cursor = 0, endpoint.cursor_version
        for due in dues:
            made += 1
            if not await self._attempt(endpoint, due):
                return made
            cursor = max(cursor, due.version)
            endpoint = endpoint._replace(attempts=0, failing_since_us=None)  # as its row now has it
        if judged_to - cursor >= PASS_SPAN or (judged_to < head and judged_to > cursor):
            await self._record(endpoint, WebhookPassed(webhook_id=endpoint.webhook_id, upto_version=judged_to))
        elif not made:
            self._judged[endpoint.webhook_id] = (endpoint.cursor_version, head)
        return made

    async def _waiting(self, endpoint: Endpoint, head: int) -> tuple[list[Due], int]:
        """The messages the endpoint has not had, in order, and the version they were judged up to."""
        dues: list[Due] = []
        judged_to = endpoint.cursor_version
        if head > endpoint.cursor_version and self._judged.get(endpoint.webhook_id) != (endpoint.cursor_version, head):
            dues, judged_to = await self._raised(endpoint)
        if endpoint.key_expiring_hours:
            dues += await self._expiring(endpoint)
        done = await webhooks.delivered(self._recorder, endpoint.webhook_id, [d.message.id for d in dues])
        waiting: dict[str, Due] = {}  # each id once, at its first: refusals of one key and minute share theirs
        for due in dues:
            if due.message.id not in done:
                waiting.setdefault(due.message.id, due)
        return list(waiting.values()), judged_to

    async def _raised(self, endpoint: Endpoint) -> tuple[list[Due], int]:
        """What the first WINDOW events after the cursor raise, judged on the org's money before
        each: carried over from the last look when the cursor is where that look ended (a long
        backlog is read once, not once a window), else the money now taken back to the cursor."""
        org, after = endpoint.org_id, endpoint.cursor_version
        carried = self._standings.pop(endpoint.webhook_id, None)
        if carried is not None and carried[0] == after:
            standing = carried[1]
            window = await webhooks.events(self._recorder, org, after, 2**63 - 1, WINDOW)
        else:
            standing, window = await self._taken_back(org, after)
        dues: list[Due] = []
        batches = await batch_queries.of_ids(self._recorder, org, alerts.wants_batches(endpoint, window))
        for happened in window:
            dues += alerts.raised(endpoint, org, standing, happened, batches)
            standing.apply(happened.event, happened.at_us)
        judged_to = window[-1].version if window else after
        self._standings[endpoint.webhook_id] = (judged_to, standing)
        return dues, judged_to

    async def _taken_back(self, org: str, after: int) -> tuple[Standing, list[Happened]]:
        """The org's money at version `after`, and the first WINDOW events after it: the money
        now, taken back over every event after `after` (read a page at a time), in one snapshot."""
        async with self._recorder.snapshot():
            head = await queries.stream_version(self._recorder, org)
            standing = Standing(await webhooks.money(self._recorder, org))
            window = await webhooks.events(self._recorder, org, after, head, WINDOW)
            for happened in window:
                standing.undo(happened.event, happened.at_us)
            await self._undo_beyond(standing, org, window[-1].version if window else head, head)
        return standing, window

    async def _undo_beyond(self, standing: Standing, org: str, after: int, head: int) -> None:
        while after < head:
            page = await webhooks.events(self._recorder, org, after, head, WINDOW)
            for happened in page:
                standing.undo(happened.event, happened.at_us)
            after = page[-1].version if page else head

    async def _expiring(self, endpoint: Endpoint) -> list[Due]:
        until = self._recorder.clock() + (endpoint.key_expiring_hours or 0) * alerts.US_PER_HOUR
        keys = await webhooks.expiring(self._recorder, endpoint.org_id, endpoint.created_at_us, until)
        return alerts.expiring(endpoint, endpoint.org_id, keys)

    async def _attempt(self, endpoint: Endpoint, due: Due) -> bool:
        """Send one message and record how it went; whether it was delivered."""
        delivery = await self._send(endpoint, due)
        now = self._recorder.clock()
        attempt = endpoint.attempts + 1
        retry_at = 0 if delivery.ok else now + int(backoff.retry_delay_s(
            attempt, first_s=self._config.retry_first_s) * 1_000_000)
        events: list[Event] = [WebhookAttempted(
            webhook_id=endpoint.webhook_id, message_id=due.message.id, alert=due.message.type,
            upto_version=due.version, attempt=attempt, status=delivery.status, delivered=delivery.ok,
            error=delivery.error[:500], latency_ms=delivery.latency_ms, retry_at_us=retry_at)]
        if not delivery.ok and backoff.gives_up(endpoint.failing_since_us or now, now, self._config.retry_for_s):
            events.append(WebhookDisabled(webhook_id=endpoint.webhook_id,
                                          reason=_disabled_reason(delivery, self._config.retry_for_s)))
        await self._record(endpoint, *events)
        return delivery.ok

    async def _send(self, endpoint: Endpoint, due: Due) -> Delivery:
        try:
            secret = await self._secret(endpoint)
        except SealingError as exc:
            return Delivery(status=0, error=f"the endpoint's secret cannot be opened: {exc}")
        body = encode(due.message)
        return await self._sender.send(endpoint.url, secret, due.message.id, body, int(time.time()))

    async def _secret(self, endpoint: Endpoint) -> str:
        name = secret_name(endpoint.webhook_id)
        sealed = await queries.sealed_secret(self._recorder, endpoint.org_id, name)
        if sealed is None or self._hooks.sealer is None:
            raise SealingError("it is not stored, or no master key is configured")
        return self._hooks.sealer.open(endpoint.org_id, name, sealed)

    async def _record(self, endpoint: Endpoint, *events: Event) -> None:
        await self._append(Append(endpoint.org_id, list(events)))
        self._judged.pop(endpoint.webhook_id, None)


def _disabled_reason(delivery: Delivery, retry_for_s: float) -> str:
    last = f"HTTP {delivery.status}" if delivery.status else delivery.error
    tried = "a day" if retry_for_s == 86_400 else f"{retry_for_s:g} s"
    return f"deliveries kept failing for {tried} (last: {last[:200]}); enable it again with PATCH enabled=true"
