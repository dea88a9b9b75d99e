"""The part of the recorder contract about holds' leases and draws, run on every backend.

Mixed into `RecorderContract`. A hold lapses `lease_us` after it was recorded or renewed; an
expiry is taken only while it is lapsed and only for all it still holds, so racing expirers end
it once; a release or a draw of more than a hold still holds is refused (HoldNotHeld).
"""

import asyncio

from ledger import leases
from ledger.events import CreditsHeld, Draw, HoldReleased, HoldsRenewed
from ledger.recorder import HoldNotHeld
from tests.ledger.claims_contract import replays_identically
from tests.ledger.ledger_helpers import append_ok, credits, key, org, request, unit, upgraded_from
import msgspec

SECOND = 1_000_000
HOLDS = "SELECT hold_id, key_id, amount_inr_nano, lapses_at_us FROM holds ORDER BY hold_id"
HELD = "SELECT held_inr_nano, spent_inr_nano FROM orgs"


def leased(hold_id: str, amount: int, lease_s: int = 10, key_id: str = "") -> CreditsHeld:
    return CreditsHeld(hold_id=hold_id, request_id="", amount_inr_nano=amount, key_id=key_id,
                       lease_us=lease_s * SECOND)


def drawing(request_id: str, charged: int, *draws: tuple[str, int]):
    return msgspec.structs.replace(request(request_id, charged=charged),
                                   draws=tuple(Draw(hold_id=h, amount_inr_nano=a) for h, a in draws))


class LeasesContract:
    async def test_a_hold_lapses_unless_renewed_and_is_expired_once(self, tmp_path, recorder):
        now = [1_000 * SECOND]
        recorder.clock = lambda: now[0]
        await append_ok(recorder, unit("acme", org(), key("k1"), credits(1000)))
        await append_ok(recorder, unit("acme", leased("h1", 100), leased("h2", 50)))
        now[0] += 5 * SECOND
        await append_ok(recorder, unit("acme", HoldsRenewed(hold_ids=("h1", "gone"), lease_us=10 * SECOND)))
        assert await recorder._fetch(HOLDS) == [("h1", "", 100, 1_015 * SECOND), ("h2", "", 50, 1_010 * SECOND)]
        now[0] += 6 * SECOND  # h2 lapsed; h1 lives on its renewal
        assert await leases.expire(recorder) == 1
        assert await recorder._fetch(HELD) == [(100, 0)]
        [early] = await recorder.append([leases.Lapsed("acme", "h1", "", 100).expiry()])
        assert isinstance(early, HoldNotHeld)  # not lapsed yet
        now[0] += 10 * SECOND
        others = [self.make_recorder(tmp_path) for _ in range(3)]
        for other in others:
            await other.open()
            other.clock = recorder.clock
        try:  # four processes expire the same lapsed hold at once: it ends once
            counts = await asyncio.gather(*(leases.expire(r) for r in (recorder, *others)))
        finally:
            for other in others:
                await other.close()
        assert sorted(counts) == [0, 0, 0, 1]
        assert await recorder._fetch(HOLDS) == [] and await recorder._fetch(HELD) == [(0, 0)]
        await replays_identically(recorder)

    async def test_a_draw_takes_from_its_hold_and_never_more_than_it_holds(self, recorder):
        await append_ok(recorder, unit("acme", org(), key("k1"), credits(1000)))
        await append_ok(recorder, unit("acme", leased("s1", 300)))
        await append_ok(recorder, unit("acme", drawing("r1", 120, ("s1", 120))),
                        unit("acme", drawing("r2", 80, ("s1", 80))))
        assert await recorder._fetch(HOLDS) == [("s1", "", 100, (await recorder._fetch(HOLDS))[0][3])]
        assert await recorder._fetch(HELD) == [(100, 200)]
        [over] = await recorder.append([unit("acme", drawing("r3", 101, ("s1", 101)))])
        assert isinstance(over, HoldNotHeld)
        await append_ok(recorder, unit("acme", HoldReleased(hold_id="s1", amount_inr_nano=100)))
        [twice] = await recorder.append([unit("acme", HoldReleased(hold_id="s1", amount_inr_nano=100))])
        assert isinstance(twice, HoldNotHeld)
        await append_ok(recorder, unit("acme", leased("s1", 40)), unit("acme", leased("s1", 2)))  # held again, added
        assert [row[2] for row in await recorder._fetch(HOLDS)] == [42]
        await replays_identically(recorder)

    async def test_a_key_slice_holds_the_budget_and_its_draws_free_it(self, recorder):
        from tests.ledger.budgets_contract import ROWS, budget
        await append_ok(recorder, unit("acme", org(), key("k1"), credits(1000), budget(500)))
        await append_ok(recorder, unit("acme", leased("s1", 300, key_id="k1")))
        await append_ok(recorder, unit("acme", msgspec.structs.replace(
            request("r1", charged=70), draws=(Draw(hold_id="s1", amount_inr_nano=70, key_id="k1"),))))
        assert await recorder._fetch(ROWS) == [("k1", 230)]
        await replays_identically(recorder)

    async def test_an_upgrade_fills_the_holds_still_held(self, tmp_path, recorder):
        await append_ok(recorder, unit("acme", org(), key("k1"), credits(1000)))
        await append_ok(recorder, unit("acme", CreditsHeld(hold_id="old1", request_id="r", amount_inr_nano=30,
                                                           key_id="k1"),
                                       CreditsHeld(hold_id="old2", request_id="r", amount_inr_nano=20)))
        await append_ok(recorder, unit("acme", HoldReleased(hold_id="old2", amount_inr_nano=20)))
        expected = await recorder._fetch(HOLDS)
        assert [row[:3] for row in expected] == [("old1", "k1", 30)]
        await recorder.close()
        async with upgraded_from(self, tmp_path, 7, "DROP TABLE holds", "ALTER TABLE request_log DROP COLUMN anomaly"
                                 ) as upgraded:
            assert await upgraded._fetch(HOLDS) == expected
            await replays_identically(upgraded)
