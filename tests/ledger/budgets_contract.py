"""The part of the recorder contract about key budgets, run on every backend.

Mixed into `RecorderContract`. A hold naming a key with a budget is accepted only when the
budget's room in its period (budget - charged since the period began - held), read under the
write lock, covers it; the period is the recorder's clock's, so these tests drive the clock.
"""

import asyncio
from datetime import UTC, datetime

from ledger.events import CreditsHeld, HoldReleased, KeySpendLimitsSet
from ledger.recorder import BudgetExceeded, InsufficientCredit
from tests.ledger.claims_contract import replays_identically
from tests.ledger.ledger_helpers import append_ok, credits, key, org, request, unit, upgraded_from


def at_us(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()) * 1_000_000


def held(hold_id: str, amount: int, key_id: str = "k1") -> CreditsHeld:
    return CreditsHeld(hold_id=hold_id, request_id=f"req-{hold_id}", amount_inr_nano=amount, key_id=key_id)


def freed(hold_id: str, amount: int, key_id: str = "k1") -> HoldReleased:
    return HoldReleased(hold_id=hold_id, amount_inr_nano=amount, key_id=key_id)


def budget(amount: int | None, period: str = "total", key_id: str = "k1", **fields) -> KeySpendLimitsSet:
    return KeySpendLimitsSet(key_id=key_id, budget_inr_nano=amount, budget_period=period, **fields)


ROWS = "SELECT key_id, held_inr_nano FROM api_keys ORDER BY key_id"


class BudgetsContract:
    async def test_a_hold_beyond_the_keys_room_is_refused_and_the_org_balance_is_not_enough(self, recorder):
        await append_ok(recorder, unit("acme", org(), key("k1"), key("k2"), credits(1000), budget(100)))
        ok, over, other = await recorder.append([
            unit("acme", held("h1", 60)), unit("acme", held("h2", 50)), unit("acme", held("h3", 500, "k2"))])
        assert isinstance(over, BudgetExceeded) and over.room_inr_nano == 40 and over.key_id == "k1"
        assert not isinstance(ok, Exception) and not isinstance(other, Exception)
        assert await recorder._fetch(ROWS) == [("k1", 60), ("k2", 500)]
        [refused] = await recorder.append([unit("acme", held("h4", 450, "k2"))])
        assert isinstance(refused, InsufficientCredit)  # the org's 1000 less 560 held
        await replays_identically(recorder)

    async def test_a_settled_hold_leaves_its_charge_spent_and_a_release_frees_the_rest(self, recorder):
        await append_ok(recorder, unit("acme", org(), key("k1"), credits(1000), budget(100)))
        await append_ok(recorder, unit("acme", held("h1", 70)))
        await append_ok(recorder, unit("acme", freed("h1", 70), request("r1", charged=30)))
        assert await recorder._fetch(ROWS) == [("k1", 0)]
        [refused] = await recorder.append([unit("acme", held("h2", 71))])
        assert isinstance(refused, BudgetExceeded) and refused.room_inr_nano == 70
        await append_ok(recorder, unit("acme", held("h3", 70)))
        await replays_identically(recorder)

    async def test_concurrent_holds_from_many_recorders_take_exactly_the_budget(self, tmp_path, recorder):
        await append_ok(recorder, unit("acme", org(), key("k1"), credits(10**6), budget(10 * 7)))
        others = [self.make_recorder(tmp_path) for _ in range(3)]
        for other in others:
            await other.open()
        try:
            results = await asyncio.gather(*(
                ([*others, recorder])[n % 4].append([unit("acme", held(f"h{n}", 7))]) for n in range(40)))
        finally:
            for other in others:
                await other.close()
        accepted = [r for [r] in results if not isinstance(r, Exception)]
        assert len(accepted) == 10
        assert all(isinstance(r, BudgetExceeded) for [r] in results if isinstance(r, Exception))
        assert await recorder._fetch(ROWS) == [("k1", 70)]

    async def test_a_daily_budget_has_room_again_at_utc_midnight_and_a_monthly_one_on_the_first(self, recorder):
        recorder.clock = lambda: at_us("2026-11-30T23:59:59")
        await append_ok(recorder, unit("acme", org(), key("k1"), key("k2"), credits(10**6),
                                       budget(100, "day"), budget(100, "month", "k2")))
        for key_id in ("k1", "k2"):
            await append_ok(recorder, unit("acme", request(f"r-{key_id}", charged=100, key_id=key_id)))
        for key_id in ("k1", "k2"):
            [refused] = await recorder.append([unit("acme", held(f"h-{key_id}", 1, key_id))])
            assert isinstance(refused, BudgetExceeded)
        recorder.clock = lambda: at_us("2026-12-01T00:00:00")  # a new day, and a new month
        await append_ok(recorder, unit("acme", held("h1", 100), held("h2", 100, "k2")))
        await append_ok(recorder, unit("acme", freed("h1", 100), freed("h2", 100, "k2")))
        recorder.clock = lambda: at_us("2026-12-01T12:00:00")
        await append_ok(recorder, unit("acme", request("r3", charged=100, key_id="k2")))
        recorder.clock = lambda: at_us("2026-12-02T00:00:01")  # a new day, the same month
        await append_ok(recorder, unit("acme", held("h5", 100)))
        [refused] = await recorder.append([unit("acme", held("h6", 1, "k2"))])
        assert isinstance(refused, BudgetExceeded) and refused.room_inr_nano == 0
        await replays_identically(recorder)

    async def test_a_total_budget_never_resets_and_clearing_it_lifts_the_check(self, recorder):
        recorder.clock = lambda: at_us("2026-01-01T00:00:00")
        await append_ok(recorder, unit("acme", org(), key("k1"), credits(10**6), budget(50)))
        await append_ok(recorder, unit("acme", request("r1", charged=50)))
        recorder.clock = lambda: at_us("2027-06-01T00:00:00")
        [refused] = await recorder.append([unit("acme", held("h1", 1))])
        assert isinstance(refused, BudgetExceeded)
        await append_ok(recorder, unit("acme", budget(None)))
        await append_ok(recorder, unit("acme", held("h2", 1000)))
        await replays_identically(recorder)

    async def test_another_orgs_budget_for_a_key_changes_nothing(self, recorder):
        await append_ok(recorder, unit("acme", org(), key("k1"), credits(1000)),
                        unit("evil", org("Evil"), budget(1, models=("x",))))
        assert await recorder._fetch("SELECT key_id FROM key_budgets") == []
        await append_ok(recorder, unit("acme", held("h1", 500)))
        await replays_identically(recorder)

    async def test_limits_are_projected_whole_and_the_last_change_holds(self, recorder):
        await append_ok(recorder, unit("acme", org(), key("k1"), budget(5, "month", models=("a", "p/*"),
                                                                           expires_at_us=123)))
        await append_ok(recorder, unit("acme", budget(None, models=("b",))))
        assert await recorder._fetch("SELECT key_id, org_id, budget_inr_nano, budget_period, models, expires_at_us"
                                     " FROM key_budgets") == [("k1", "acme", None, "total", "b", None)]
        await replays_identically(recorder)

    async def test_a_version_6_store_fills_each_keys_daily_spend_from_the_log(self, tmp_path, recorder):
        await append_ok(recorder, unit("acme", org(), key("k1"), key("k2"), credits(1000)),
                        unit("beta", org(), key("b1"), credits(1000)))
        await append_ok(recorder, unit("acme", request("r1", charged=5), request("r2", charged=7, key_id="k2")),
                        unit("acme", request("r3", charged=0)), unit("beta", request("r4", charged=9, key_id="b1")))
        expected = await recorder._fetch("SELECT * FROM key_spend_daily ORDER BY org_id, key_id")
        assert [(o, k, c) for o, k, _, c in expected] == [("acme", "k1", 5), ("acme", "k2", 7), ("beta", "b1", 9)]
        await recorder.close()
        async with upgraded_from(self, tmp_path, 6, "DROP TABLE key_spend_daily", "DROP TABLE key_budgets",
                                 "ALTER TABLE api_keys DROP COLUMN held_inr_nano") as upgraded:
            assert await upgraded._fetch("SELECT * FROM key_spend_daily ORDER BY org_id, key_id") == expected
            await replays_identically(upgraded)
