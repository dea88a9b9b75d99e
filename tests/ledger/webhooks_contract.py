"""The part of the recorder contract about webhook endpoints and turns, run on every backend.

Mixed into `RecorderContract`. An endpoint's row is a function of its org's webhook events: its
cursor moves with each delivery (never back) and each pass, failures in a row are counted from
the first, a change or an enabling starts them afresh, and another org's events never touch it.
A turn is one process's at a time, and free again once released.
"""

from ledger import webhooks
from ledger.events import WebhookAttempted, WebhookDisabled, WebhookPassed, WebhookRemoved, WebhookSet
from tests.ledger.claims_contract import replays_identically
from tests.ledger.ledger_helpers import append_ok, credits, org, unit

SECOND = 1_000_000


def endpoint(webhook_id: str = "wh1", **fields) -> WebhookSet:
    return WebhookSet(webhook_id=webhook_id, url=fields.pop("url", "https://example.com/hook"),
                      alerts=fields.pop("alerts", ("balance.low", "credits.added")), **fields)


def attempt(version: int, delivered: bool, *, webhook_id: str = "wh1", retry_at_us: int = 0) -> WebhookAttempted:
    return WebhookAttempted(webhook_id=webhook_id, message_id=f"msg_{version}", alert="credits.added",
                            upto_version=version, attempt=1, status=200 if delivered else 500,
                            delivered=delivered, error="" if delivered else "HTTP 500", retry_at_us=retry_at_us)


class WebhooksContract:
    async def test_an_endpoint_row_follows_its_events(self, recorder):
        now = [1_000 * SECOND]
        recorder.clock = lambda: now[0]
        await append_ok(recorder, unit("acme", org(), endpoint(balance_low_inr_nano=10, key_budget_percent=(50, 80))))
        [found] = await webhooks.of_org(recorder, "acme")
        assert (found.cursor_version, found.alerts, found.key_budget_percent, found.enabled) == (
            2, ("balance.low", "credits.added"), (50, 80), True)
        await append_ok(recorder, unit("acme", credits(5), attempt(3, False, retry_at_us=7)))
        now[0] += SECOND
        await append_ok(recorder, unit("acme", attempt(3, False, retry_at_us=9)))
        failing = await webhooks.one(recorder, "acme", "wh1")
        assert failing and (failing.cursor_version, failing.attempts, failing.failing_since_us,
                            failing.retry_at_us) == (2, 2, 1_000 * SECOND, 9)
        await append_ok(recorder, unit("acme", attempt(3, True), WebhookPassed(webhook_id="wh1", upto_version=7)))
        done = await webhooks.one(recorder, "acme", "wh1")
        assert done and (done.cursor_version, done.attempts, done.failing_since_us, done.retry_at_us) == (7, 0, None, 0)
        await append_ok(recorder, unit("acme", attempt(5, True)))  # a late one never moves the cursor back
        assert [a.delivered for a in await webhooks.recent(recorder, "acme", "wh1")] == [True, True, False, False]
        assert (await webhooks.delivered(recorder, "wh1", ["msg_3", "msg_4"])) == {"msg_3"}
        await replays_identically(recorder)

    async def test_disabling_enabling_and_removing(self, recorder):
        await append_ok(recorder, unit("acme", org(), endpoint(), attempt(9, False, retry_at_us=5)))
        await append_ok(recorder, unit("acme", WebhookDisabled(webhook_id="wh1", reason="failing for a day")))
        off = await webhooks.one(recorder, "acme", "wh1")
        assert off and (off.enabled, off.disabled_reason) == (False, "failing for a day")
        assert await webhooks.due(recorder, 10) == []
        await append_ok(recorder, unit("acme", endpoint(url="https://example.com/v2")))
        on = await webhooks.one(recorder, "acme", "wh1")
        assert on and (on.enabled, on.disabled_reason, on.attempts, on.url) == (True, "", 0, "https://example.com/v2")
        assert [(e.webhook_id, head) for e, head in await webhooks.due(recorder, 10)] == [("wh1", 5)]
        await replays_identically(recorder)
        await append_ok(recorder, unit("acme", WebhookRemoved(webhook_id="wh1")))
        assert await webhooks.of_org(recorder, "acme") == []
        assert await webhooks.recent(recorder, "acme", "wh1") == []
        await replays_identically(recorder)

    async def test_another_orgs_events_never_touch_an_endpoint(self, recorder):
        await append_ok(recorder, unit("acme", org(), endpoint()), unit("evil", org()))
        await append_ok(recorder, unit("evil", endpoint(url="https://evil.example/"), attempt(99, True),
                                       WebhookDisabled(webhook_id="wh1", reason="x"),
                                       WebhookPassed(webhook_id="wh1", upto_version=50),
                                       WebhookRemoved(webhook_id="wh1")))
        mine = await webhooks.one(recorder, "acme", "wh1")
        assert mine and (mine.url, mine.enabled, mine.cursor_version) == ("https://example.com/hook", True, 2)
        assert await webhooks.recent(recorder, "acme", "wh1") == []
        assert await webhooks.one(recorder, "evil", "wh1") is None
        await replays_identically(recorder)

    async def test_a_turn_is_one_recorders_at_a_time(self, tmp_path, recorder):
        other = self.make_recorder(tmp_path)
        await other.open()
        try:
            turn = await recorder.take_turn("webhooks")
            assert turn is not None and await turn.held()
            assert await other.take_turn("webhooks") is None
            elsewhere = await other.take_turn("another-job")  # jobs are independent
            assert elsewhere is not None
            await elsewhere.release()
            await turn.release()
            assert not await turn.held()
            taken = await other.take_turn("webhooks")
            assert taken is not None and await taken.held()
            await taken.release()
        finally:
            await other.close()
