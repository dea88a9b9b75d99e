"""Which alerts an org's events raise for an endpoint (gateway.webhooks.alerts): examples of each
kind, and properties over any run of credits, charges and refusals: balance.low fires exactly
where the balance crosses the threshold downwards, each key.budget percentage once per period,
and however the log is cut into windows (a cursor anywhere, the money before it taken back from
the head), the same alerts come out under the same ids."""

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.webhooks import alerts
from gateway.webhooks.alerts import Standing
from ledger.batch_queries import BatchRow
from ledger.events import (
    Attempt, BatchEnded, BatchLineError, CreditsAdded, KeySpendLimitsSet, RequestCompleted, WebhookTestRequested,
)
from ledger.webhooks import Endpoint, Happened, Money

DAY_US = 86_400_000_000
T0 = 20_000 * DAY_US  # 2024-10-04, a UTC midnight
INR = 1_000_000_000


def endpoint(*alerts_: str, low: int | None = None, percent: tuple[int, ...] = (), hours: int | None = None,
             webhook_id: str = "wh1") -> Endpoint:
    return Endpoint(webhook_id, "acme", "https://example.com/", alerts_, low, percent, hours, True, "", T0, 0, 0,
                    None, 0)


def charge(request_id: str, charged: int, key_id: str = "k1", status: int = 200) -> RequestCompleted:
    return RequestCompleted(request_id=request_id, key_id=key_id, route="/v1/chat/completions", model="gpt-4o-mini",
                            provider="openai", status=status, charged_inr_nano=charged)


def refusal(request_id: str, key_id: str = "k1", status: int = 402) -> RequestCompleted:
    return RequestCompleted(request_id=request_id, key_id=key_id, route="/v1/chat/completions", model="gpt-4o-mini",
                            provider="", status=status, error="key budget exceeded")


def history(*events, step_us: int = 1_000_000) -> list[Happened]:
    return [Happened(n + 1, T0 + n * step_us, event) for n, event in enumerate(events)]


def raised_all(hook: Endpoint, events: list[Happened], money: Money) -> list[alerts.Due]:
    """Every alert, judged from the start with `money` as it stood before the first event."""
    standing, found = Standing(money), []
    for happened in events:
        found += alerts.raised(hook, "acme", standing, happened)
        standing.apply(happened.event, happened.at_us)
    return found


def head_money(start: Money, events: list[Happened]) -> Money:
    standing = Standing(start)
    for happened in events:
        standing.apply(happened.event, happened.at_us)
    return Money(standing.balance_inr_nano, standing.budgets, standing.charged)


def test_each_kind_with_its_data_and_id():
    hook = endpoint("balance.low", "credits.added", "key.budget", "request.refused", "webhook.test",
                    low=10 * INR, percent=(50, 100))
    events = history(CreditsAdded(amount_inr_nano=5 * INR, note="top-up"), charge("r1", 6 * INR),
                     charge("r2", 5 * INR), refusal("r3"), WebhookTestRequested(webhook_id="wh1"),
                     WebhookTestRequested(webhook_id="other"))
    money = Money(10 * INR, {"k1": (10 * INR, "month")}, {})
    found = [(due.message.type, due.message.id, due.version) for due in raised_all(hook, events, money)]
    assert found == [
        ("credits.added", "msg_acme.1.credits.added", 1),
        ("balance.low", "msg_acme.2.balance.low", 2),  # 15 -> 9 crosses 10; 9 -> 4 crosses nothing
        ("key.budget", "msg_acme.2.key.budget.50", 2),  # 6 of 10
        ("key.budget", "msg_acme.3.key.budget.100", 3),  # 11 of 10
        ("request.refused", f"msg_acme.m{(T0 + 3_000_000) // 60_000_000}.request.refused.k1.402", 4),
        ("webhook.test", "msg_acme.5.webhook.test", 5)]
    data = {due.message.id: due.message.data for due in raised_all(hook, events, money)}
    assert data["msg_acme.1.credits.added"] == {"org_id": "acme", "amount_inr": "5", "note": "top-up",
                                                "balance_inr": "15"}
    low = data["msg_acme.2.balance.low"]
    assert (low["balance_inr"], low["threshold_inr"], low["request_id"]) == ("9", "10", "r1")
    budget = data["msg_acme.3.key.budget.100"]
    assert (budget["spent_inr"], budget["budget_inr"], budget["resets_at"]) == ("11", "10", "2024-11-01T00:00:00.000Z")


def test_only_the_alerts_an_endpoint_wants_and_one_refusal_id_a_minute():
    provider_403 = RequestCompleted(request_id="p", key_id="k1", route="/v1/chat/completions", model="m",
                                    provider="openai", status=403, attempts=(Attempt("openai", 403, 5),))
    events = history(*(refusal(f"r{n}") for n in range(5)), refusal("x", status=403), refusal("y", key_id="k2"),
                     provider_403, step_us=10_000_000)  # 0 s .. 70 s from a minute's start
    found = [due.message.id for due in raised_all(endpoint("request.refused"), events, Money(0, {}, {}))]
    assert len(found) == 7 and len(set(found)) == 3  # the deliverer sends an id once: three alerts
    assert raised_all(endpoint("credits.added"), events, Money(0, {}, {})) == []


def test_a_budget_set_in_the_window_counts_from_then_on():
    hook = endpoint("key.budget", percent=(80,))
    events = history(charge("r1", 7 * INR), KeySpendLimitsSet(key_id="k1", budget_inr_nano=10 * INR,
                                                              budget_period="day"), charge("r2", INR))
    assert [due.message.id for due in raised_all(hook, events, Money(100 * INR, {}, {}))] == [
        "msg_acme.3.key.budget.80"]


def test_key_expiring_is_timed_from_when_it_fell_due():
    hook = endpoint("key.expiring", hours=24)
    [due] = alerts.expiring(hook, "acme", [("k1", T0 + 2 * DAY_US)])
    assert (due.message.id, due.message.created_at, due.version) == (
        f"msg_acme.{T0 + 2 * DAY_US}.key.expiring.k1", "2024-10-05T00:00:00.000Z", 0)
    assert due.message.data["expires_at"] == "2024-10-06T00:00:00.000Z"


def batch_row(batch_id: str, lines: int, succeeded: int, failed: int, charged: int) -> BatchRow:
    return BatchRow(batch_id, "acme", 1, "k1", "openai", "/v1/chat/completions", "gpt-4o-mini", "openai", 0, "file-1",
                    lines, "hold-1", "24h", "{}", T0, T0 + DAY_US, "", None, "", None, "", "", "", succeeded, failed,
                    charged, 0, 0)


def test_a_batch_end_raises_the_alert_of_its_status_with_its_counts():
    hook = endpoint("batch.completed", "batch.cancelled")
    events = history(BatchEnded(batch_id="b1", status="completed", output_file_id="file-o"),
                     BatchEnded(batch_id="b2", status="failed", errors=(BatchLineError("invalid_json", "x", 2),)),
                     BatchEnded(batch_id="b3", status="cancelled", error_file_id="file-e"))
    assert alerts.wants_batches(hook, events) == ["b1", "b3"]  # b2's failure is not wanted
    rows = {"b1": batch_row("b1", 3, 3, 0, INR // 2), "b3": batch_row("b3", 5, 1, 1, INR)}
    found = [alerts.raised(hook, "acme", Standing(Money(0, {}, {})), h, rows) for h in events]
    assert [[(d.message.id, d.message.type, d.version) for d in dues] for dues in found] == [
        [("msg_acme.1.batch.completed", "batch.completed", 1)], [],
        [("msg_acme.3.batch.cancelled", "batch.cancelled", 3)]]
    completed, cancelled = found[0][0].message.data, found[2][0].message.data
    assert completed == {"org_id": "acme", "batch_id": "b1", "status": "completed", "output_file_id": "file-o",
                         "error_file_id": None, "ended_at": "2024-10-04T00:00:00.000Z", "errors": [], "error_count": 0,
                         "api": "openai", "endpoint": "/v1/chat/completions", "model": "gpt-4o-mini",
                         "created_at": "2024-10-04T00:00:00.000Z",
                         "request_counts": {"total": 3, "completed": 3, "failed": 0}, "cost_inr": "0.5"}
    assert (cancelled["request_counts"], cancelled["cost_inr"], cancelled["error_file_id"]) == (
        {"total": 5, "completed": 1, "failed": 1}, "1", "file-e")
    [failed] = alerts.raised(endpoint("batch.failed"), "acme", Standing(Money(0, {}, {})), events[1])
    assert failed.message.data["errors"] == [{"code": "invalid_json", "message": "x", "line": 2, "param": None}]
    assert "request_counts" not in failed.message.data  # no row read: the event's own fields only


amounts = st.integers(min_value=0, max_value=50)
moves = st.lists(st.tuples(st.sampled_from(["credit", "charge", "refuse", "k2"]), amounts), max_size=40)


def events_of(drawn: list[tuple[str, int]]) -> list[Happened]:
    made = {"credit": lambda n, a: CreditsAdded(amount_inr_nano=a * INR),
            "charge": lambda n, a: charge(f"r{n}", a * INR),
            "refuse": lambda n, a: refusal(f"r{n}"),
            "k2": lambda n, a: charge(f"r{n}", a * INR, key_id="k2")}
    return history(*(made[kind](n, amount) for n, (kind, amount) in enumerate(drawn)), step_us=DAY_US // 7)


@settings(max_examples=300, deadline=None)
@given(moves, st.integers(min_value=0, max_value=100), st.integers(min_value=0, max_value=100))
def test_balance_low_fires_exactly_at_each_downward_crossing(drawn, start, threshold):
    events = events_of(drawn)
    found = [due.version for due in raised_all(endpoint("balance.low", low=threshold * INR), events,
                                               Money(start * INR, {}, {}))]
    balance, crossings = start * INR, []
    for happened in events:
        after = balance + happened.event.amount_inr_nano if isinstance(happened.event, CreditsAdded) \
            else balance - happened.event.charged_inr_nano
        if balance >= threshold * INR > after:
            crossings.append(happened.version)
        balance = after
    assert found == crossings


@settings(max_examples=300, deadline=None)
@given(moves, st.sampled_from(["day", "month", "total"]), st.integers(min_value=1, max_value=200))
def test_each_budget_percentage_once_per_period(drawn, period, budget):
    hook = endpoint("key.budget", percent=(50, 80, 100))
    found = raised_all(hook, events_of(drawn), Money(0, {"k1": (budget * INR, period)}, {}))
    seen = [(due.message.data["percent"], due.message.data["resets_at"]) for due in found]
    assert len(seen) == len(set(seen))
    assert all(due.message.data["key_id"] == "k1" for due in found)


@settings(max_examples=300, deadline=None)
@given(moves, st.integers(min_value=0, max_value=100), st.data())
def test_any_window_raises_what_the_whole_log_raises(drawn, start, data):
    hook = endpoint("balance.low", "credits.added", "key.budget", "request.refused", low=30 * INR, percent=(50, 100))
    events = events_of(drawn)
    money = Money(start * INR, {"k1": (40 * INR, "month"), "k2": (20 * INR, "day")}, {})
    whole = raised_all(hook, events, money)
    cursor = data.draw(st.integers(min_value=0, max_value=len(events)))
    standing = Standing(head_money(money, events))  # as the deliverer sees it: the money now ...
    for happened in events[cursor:]:
        standing.undo(happened.event, happened.at_us)  # ... taken back to the cursor
    windowed = raised_all(hook, events[cursor:], Money(standing.balance_inr_nano, standing.budgets, standing.charged))
    assert windowed == [due for due in whole if due.version > cursor]
