"""The part of the recorder contract about monthly statements (gateway.dashboard.statements), run
on every backend. Mixed into `RecorderContract`.

Hypothesis draws batches of credits, requests (charged or not, of various keys, models and rates),
holds (escrow slices' and requests' own), releases and draws, each batch at an instant near a
month's boundary, for a few orgs; the
ledger refuses what it must (a release or draw of more than a hold holds). Every statement figure
must equal a plain sum over the org's events as read back from the log, to the nano-rupee, and a
replay must rebuild the rollups identically.
"""

import asyncio
import itertools
import os
from collections import defaultdict
from datetime import UTC, datetime
from decimal import Decimal

import msgspec
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from gateway.dashboard import statements
from ledger import queries
from ledger.events import CreditsAdded, CreditsHeld, Draw, HoldReleased, RequestCompleted, is_slice
from ledger.periods import US_PER_DAY
from ledger.recorder import Recorded
from tests.ledger.claims_contract import replays_identically
from tests.ledger.ledger_helpers import append_ok, credits, key, org, request, unit, upgraded_from

EXAMPLES = int(os.environ.get("STATEMENT_EXAMPLES", "25"))
MONTHS = ("2024-12", "2025-01", "2025-02", "2025-03", "2025-04")


def instant(*parts: int) -> int:
    return int(datetime(*parts, tzinfo=UTC).timestamp()) * 1_000_000  # type: ignore[arg-type, misc]


# Instants on both sides of the ends of January and February (a microsecond apart), and within.
INSTANTS = (instant(2025, 1, 15), instant(2025, 2, 1) - 1, instant(2025, 2, 1), instant(2025, 2, 1) + 1,
            instant(2025, 2, 14, 12), instant(2025, 3, 1) - 1, instant(2025, 3, 1), instant(2025, 3, 20))
amounts = st.integers(min_value=0, max_value=5_000)
HOLDS = ("slice_1", "hold_2")  # an escrow slice (ledger.events.is_slice) and a request's own hold
operation = st.one_of(
    st.tuples(st.just("credit"), st.integers(min_value=0, max_value=50_000)),
    st.tuples(st.just("request"), st.sampled_from(("k1", "k2")), st.sampled_from(("m-a", "m-b")),
              st.sampled_from(("84", "84.5", "90.125", "0")), amounts),
    st.tuples(st.just("hold"), st.sampled_from(HOLDS), amounts),
    st.tuples(st.just("release"), st.sampled_from(HOLDS), amounts),
    st.tuples(st.just("draw"), st.sampled_from(HOLDS), st.integers(0, 1_500), amounts,
              st.sampled_from(("k1", "k2"))))
# An escrow slice held in January, drawn on either side of its end, the rest released in February;
# a request's own hold beside it, held over the month's end.
DRAWING = [(0, [(0, ("credit", 9_000))]), (0, [(0, ("hold", "slice_1", 4_000)), (0, ("hold", "hold_2", 600))]),
           (1, [(0, ("draw", "slice_1", 1_000, 5, "k2"))]),
           (2, [(0, ("draw", "slice_1", 500, 0, "k1")), (1, ("request", "k1", "m-b", "84", 3))]),
           (4, [(0, ("release", "slice_1", 2_500)), (0, ("release", "hold_2", 600))])]
batches = st.lists(st.tuples(st.integers(0, len(INSTANTS) - 1),
                             st.lists(st.tuples(st.sampled_from((0, 0, 1)), operation), min_size=1, max_size=4)),
                   min_size=1, max_size=10).map(lambda drawn: sorted(drawn, key=lambda batch: batch[0]))


def event_of(op: tuple, request_id: str, org_id: str):
    """The event of a drawn operation in an org: its keys and holds are the org's own."""
    own, held = f"{org_id}.", f"{op[1]}.{org_id}" if op[0] in ("hold", "release", "draw") else ""
    match op:
        case ("credit", amount):
            return credits(amount)
        case ("request", key_id, model, rate, charged):
            return msgspec.structs.replace(request(request_id, key_id=own + key_id, usd_to_inr=rate, charged=charged),
                                           model=model)
        case ("hold", _, amount):
            return CreditsHeld(hold_id=held, request_id="" if is_slice(held) else request_id, amount_inr_nano=amount,
                               key_id=own + "k1")
        case ("release", _, amount):
            return HoldReleased(hold_id=held, amount_inr_nano=amount, key_id=own + "k1")
        case ("draw", _, amount, extra, key_id):
            drawn = Draw(hold_id=held, amount_inr_nano=amount, key_id=own + "k1")
            return msgspec.structs.replace(request(request_id, key_id=own + key_id, charged=amount + extra),
                                           draws=(drawn,))
    raise AssertionError(op)


def expected(events: list[Recorded], month: statements.Month) -> dict:
    """The statement, summed straight from the org's events: nano-rupees, and per group
    (requests, charged)."""
    first, end = month.first_day * US_PER_DAY, month.end_day * US_PER_DAY
    sums = {"credits_before": 0, "charged_before": 0, "credits": 0, "charges": 0, "held": 0, "escrow": 0}
    groups: dict[str, defaultdict] = {name: defaultdict(lambda: [0, 0]) for name in ("model", "key_id", "day", "csv")}
    rates: set[str] = set()
    for r in events:
        at, e = r.recorded_at_us, r.event
        when = "before" if at < first else "in" if at < end else "after"
        if isinstance(e, CreditsAdded) and when != "after":
            sums["credits_before" if when == "before" else "credits"] += e.amount_inr_nano
        if isinstance(e, CreditsHeld) and when != "after":
            sums["escrow" if is_slice(e.hold_id) else "held"] += e.amount_inr_nano
        if isinstance(e, HoldReleased) and when != "after":
            sums["escrow" if is_slice(e.hold_id) else "held"] -= e.amount_inr_nano
        if isinstance(e, RequestCompleted) and when != "after":
            for d in e.draws:
                sums["escrow" if is_slice(d.hold_id) else "held"] -= d.amount_inr_nano
            sums["charged_before" if when == "before" else "charges"] += e.charged_inr_nano
        if isinstance(e, RequestCompleted) and when == "in":
            rates.update({e.usd_to_inr} - {"0"})  # what a request that priced nothing records
            day = datetime.fromtimestamp(at // 1_000_000, UTC).date().isoformat()
            for name, value in (("model", e.model), ("key_id", e.key_id), ("day", day),
                                ("csv", (day, e.key_id, e.model))):
                groups[name][value][0] += 1
                groups[name][value][1] += e.charged_inr_nano
    opening = sums["credits_before"] - sums["charged_before"]
    return {"opening": opening, "credits": sums["credits"], "charges": sums["charges"],
            "closing": opening + sums["credits"] - sums["charges"], "held": sums["held"], "escrow": sums["escrow"],
            "rates": rates,
            **{name: sorted((value, *tally) for value, tally in groups[name].items()) for name in groups}}


def nano(text: str) -> int:
    amount = Decimal(text).scaleb(9)
    assert amount == amount.to_integral_value(), text
    return int(amount)


def figures(statement: dict, csv_text: str) -> dict:
    """The statement's figures in the shape of `expected`."""
    lines = csv_text.splitlines()
    assert lines[0] == ",".join(statements.CSV_HEADER)
    rows = [line.split(",") for line in lines[1:]]
    return {"opening": nano(statement["opening_balance_inr"]), "credits": nano(statement["credits_inr"]),
            "charges": nano(statement["charges_inr"]), "closing": nano(statement["closing_balance_inr"]),
            "held": nano(statement["held_inr"]), "escrow": nano(statement["escrow_inr"]),
            "rates": set(statement["usd_to_inr_rates"]),
            **{name: [(g[name], g["requests"], nano(g["charged_inr"])) for g in statement[listing]]
               for name, listing in (("model", "by_model"), ("key_id", "by_key"), ("day", "by_day"))},
            "csv": [((day, key_id, model), int(n), nano(charged)) for day, key_id, model, n, charged in rows]}


class StatementsContract:
    async def test_statement_figures_are_sums_of_the_events_and_replay_rebuilds_the_rollups(self, recorder):
        loop, now, examples, drew = asyncio.get_running_loop(), [INSTANTS[0]], itertools.count(), []
        recorder.clock = lambda: now[0]

        async def check(drawn: list) -> None:
            tag = f"x{next(examples)}"
            orgs = (f"acme-{tag}", f"beta-{tag}")
            await append_ok(recorder, *(unit(name, org(), key(f"{name}.k1"), key(f"{name}.k2")) for name in orgs))
            for n, (at, ops) in enumerate(drawn):
                now[0] = INSTANTS[at]  # one append, one instant: a batch of units, folded together
                await recorder.append([unit(orgs[o], event_of(op, f"r{tag}-{n}-{i}", orgs[o]))
                                       for i, (o, op) in enumerate(ops)])
            for org_id in orgs:
                events = await statement_matches(recorder, org_id)
                drew.extend(r for r in events if isinstance(r.event, RequestCompleted) and r.event.draws)

        @settings(max_examples=EXAMPLES, deadline=None, phases=[Phase.explicit, Phase.generate], database=None,
                  suppress_health_check=list(HealthCheck))
        @given(batches)
        @example(DRAWING)
        def one(drawn: list) -> None:
            asyncio.run_coroutine_threadsafe(check(drawn), loop).result()

        await asyncio.to_thread(one)
        assert next(examples) >= min(EXAMPLES, 10) and len(drew) >= 2  # DRAWING's draws at least
        await replays_identically(recorder)

    async def test_an_upgrade_fills_the_statement_rollups(self, tmp_path, recorder):
        now = [instant(2025, 1, 31, 23)]
        recorder.clock = lambda: now[0]
        await append_ok(recorder, unit("acme", org(), key("k1"), credits(1000)), unit("beta", org(), credits(7)))
        await escrow_across_a_days_end(recorder, now)
        rollups = "SELECT * FROM {} ORDER BY 1, 2, 3"
        charges = await recorder._fetch(rollups.format("charges_daily"))
        balance = await recorder._fetch(rollups.format("balance_daily"))
        assert len(charges) == 3 and len(balance) == 3
        await recorder.close()
        async with upgraded_from(self, tmp_path, 8, "DROP TABLE charges_daily", "DROP TABLE balance_daily") as upgraded:
            assert await upgraded._fetch(rollups.format("charges_daily")) == charges
            assert await upgraded._fetch(rollups.format("balance_daily")) == balance
            await statement_matches(upgraded, "acme")
            await replays_identically(upgraded)

    async def test_an_upgrade_to_11_tells_escrow_from_requests_holds_in_the_balance_rollup(self, tmp_path, recorder):
        now = [instant(2025, 1, 31, 23)]
        recorder.clock = lambda: now[0]
        await append_ok(recorder, unit("acme", org(), key("k1"), credits(1000)), unit("beta", org(), credits(7)))
        await escrow_across_a_days_end(recorder, now)
        balance = await recorder._fetch("SELECT * FROM balance_daily ORDER BY org_id, day")
        assert [row[-1] for row in balance] == [300, -150, 0]  # escrow: 300 held, 100 drawn and 50 returned
        await recorder.close()
        dropped = "ALTER TABLE balance_daily DROP COLUMN escrow_inr_nano"
        async with upgraded_from(self, tmp_path, 10, dropped) as upgraded:
            assert await upgraded._fetch("SELECT * FROM balance_daily ORDER BY org_id, day") == balance
            january = await statements.statement(upgraded, "acme", statements.parse_month("2025-01"))
            assert (nano(january["held_inr"]), nano(january["escrow_inr"])) == (40, 300)
            await statement_matches(upgraded, "acme")
            await replays_identically(upgraded)


async def escrow_across_a_days_end(recorder, now: list[int]) -> None:
    """acme: an escrow slice of 300 and a request's own hold of 40 at `now`, a charge of 5; a day
    later a charge drawing 100 from the slice, 50 of it returned, the request's hold released, 3
    credits; beta: a failed request."""
    await append_ok(recorder, unit("acme", CreditsHeld(hold_id="slice_1", request_id="", amount_inr_nano=300),
                                   CreditsHeld(hold_id="hold_2", request_id="r0", amount_inr_nano=40)),
                    unit("acme", request("r1", charged=5, usd_to_inr="84")))
    now[0] += US_PER_DAY
    await append_ok(recorder, unit("acme", msgspec.structs.replace(
        request("r2", charged=120, usd_to_inr="85"), draws=(Draw(hold_id="slice_1", amount_inr_nano=100),))),
        unit("acme", HoldReleased(hold_id="slice_1", amount_inr_nano=50),
             HoldReleased(hold_id="hold_2", amount_inr_nano=40)),
        unit("acme", credits(3)), unit("beta", request("r3", key_id="b1", status=502)))


async def statement_matches(recorder, org_id: str) -> list[Recorded]:
    """Every month's statement of the org equals the sums of its events; the last month's (after
    every event) closes on the orgs projection's balance and holds what it holds. The events."""
    events = await recorder.read_stream(org_id)
    for text in MONTHS:
        month = statements.parse_month(text)
        statement = await statements.statement(recorder, org_id, month)
        assert (statement["org_id"], statement["month"]) == (org_id, text)
        assert figures(statement, await statements.charges_csv(recorder, org_id, month)) == expected(events, month)
    [(credits_, spent, held)] = await recorder._fetch(
        "SELECT credits_inr_nano, spent_inr_nano, held_inr_nano FROM orgs WHERE org_id = ?", (org_id,))
    escrow = nano(statement["escrow_inr"])
    assert (nano(statement["closing_balance_inr"]), nano(statement["held_inr"]) + escrow) == (credits_ - spent, held)
    assert escrow == await queries.org_escrow(recorder, org_id)  # the holds projection's slices
    return events
