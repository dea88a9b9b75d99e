"""The part of the recorder contract about Idempotency-Key claims, run on every backend.

Mixed into `RecorderContract`, so it uses that class's hooks (`recorder`, `make_recorder`,
`execute_raw`). A claim is an event whose projection row (org, key) is the primary key of
`idempotency_keys`: a second claim of a key the org holds breaks its unit, in any call, from any
process; a release ends a claim; a success settles it.
"""

import asyncio

from ledger import audit
from ledger.recorder import AppendRejected, InsufficientCredit
from tests.ledger.ledger_helpers import (
    append_ok, claim, credits, hold, music, org, projection_tables, unclaim, unit, upgraded_from,
)

LEASE_US = 60_000_000
KEY_ROWS = ("SELECT org_id, idempotency_key, request_hash, request_id, created_at_us, running_until_us"
            " FROM idempotency_keys ORDER BY org_id, idempotency_key")


async def replays_identically(recorder) -> None:
    """The projection is a function of the log: a replay rebuilds it, and verify agrees."""
    before = await projection_tables(recorder)
    await audit.replay(recorder)
    assert await projection_tables(recorder) == before
    assert (await audit.verify(recorder))[1] == []


class ClaimsContract:
    async def test_a_key_the_org_holds_cannot_be_claimed_again_in_a_later_or_the_same_call(self, recorder):
        await append_ok(recorder, unit("acme", org()), unit("beta", org()))
        [[first]] = await append_ok(recorder, unit("acme", claim("k", "r1")))
        later, same_call, twice_in_call, other_org = await recorder.append([
            unit("acme", claim("k", "r2")), unit("acme", claim("j", "r3")), unit("acme", claim("j", "r4")),
            unit("beta", claim("k", "r5"))])
        assert isinstance(later, AppendRejected) and isinstance(twice_in_call, AppendRejected)
        [[j]], [[beta]] = [same_call], [other_org]  # keys are the organization's own
        assert await recorder._fetch(KEY_ROWS) == [
            ("acme", "j", "h", "r3", j.recorded_at_us, j.recorded_at_us + LEASE_US),
            ("acme", "k", "h", "r1", first.recorded_at_us, first.recorded_at_us + LEASE_US),
            ("beta", "k", "h", "r5", beta.recorded_at_us, beta.recorded_at_us + LEASE_US)]
        assert not [r for r in await recorder.read() if getattr(r.event, "request_id", "") in ("r2", "r4")]
        await replays_identically(recorder)

    async def test_a_claim_is_rejected_with_its_hold_and_a_refused_hold_leaves_no_claim(self, recorder):
        await append_ok(recorder, unit("acme", org(), credits(100)))
        await append_ok(recorder, unit("acme", claim("k", "r1"), hold("h1", 60)))
        taken, uncovered = await recorder.append([unit("acme", claim("k", "r2"), hold("h2", 10)),
                                                  unit("acme", claim("j", "r3"), hold("h3", 50))])
        assert isinstance(taken, AppendRejected) and isinstance(uncovered, InsufficientCredit)
        assert await recorder._fetch("SELECT held_inr_nano FROM orgs") == [(60,)]
        assert await recorder._fetch("SELECT request_id FROM idempotency_keys") == [("r1",)]

    async def test_a_released_key_can_be_claimed_again_and_a_success_settles_it(self, recorder):
        await append_ok(recorder, unit("acme", org()))
        await append_ok(recorder, unit("acme", claim("k", "r1")))
        await append_ok(recorder, unit("acme", unclaim("k", "r1")))  # r1 failed, not charged
        assert await recorder._fetch(KEY_ROWS) == []
        await append_ok(recorder, unit("acme", claim("k", "r2", "h2")))
        [[settled]] = await append_ok(recorder, unit("acme", music("r2", idempotency_key="k", request_hash="h2")))
        assert await recorder._fetch(KEY_ROWS) == [("acme", "k", "h2", "r2", settled.recorded_at_us, 0)]
        [again] = await recorder.append([unit("acme", claim("k", "r3", "h2"))])
        assert isinstance(again, AppendRejected)  # a settled use holds its key for its 24 hours
        await replays_identically(recorder)

    async def test_of_claims_racing_to_replace_a_lapsed_one_only_the_first_wins(self, recorder):
        await append_ok(recorder, unit("acme", org()))
        await append_ok(recorder, unit("acme", claim("k", "r1", lease_us=1)))
        first, second = await recorder.append([unit("acme", unclaim("k", "r1"), claim("k", "r2")),
                                               unit("acme", unclaim("k", "r1"), claim("k", "r3"))])
        assert not isinstance(first, Exception) and isinstance(second, AppendRejected)
        # The lapsed request settling late, either way, does not touch the claim that replaced it.
        await append_ok(recorder, unit("acme", music("r1", idempotency_key="k", request_hash="h")),
                        unit("acme", unclaim("k", "r1")))
        [(request_id, running_until_us)] = await recorder._fetch(
            "SELECT request_id, running_until_us FROM idempotency_keys")
        assert request_id == "r2" and running_until_us > 0
        await replays_identically(recorder)

    async def test_claims_and_releases_in_one_unit_replay_in_log_order(self, recorder):
        await append_ok(recorder, unit("acme", org(), claim("k", "r1"), unclaim("k", "r1"), claim("k", "r2"),
                                       music("r2", idempotency_key="k", request_hash="h"), claim("j", "r3")))
        assert await recorder._fetch("SELECT idempotency_key, request_id, running_until_us > 0 FROM idempotency_keys"
                                    " ORDER BY idempotency_key") == [("j", "r3", True), ("k", "r2", False)]
        await replays_identically(recorder)

    async def test_two_recorders_on_one_store_racing_for_a_key_admit_one_claim(self, recorder, tmp_path):
        await append_ok(recorder, unit("acme", org()))
        other = self.make_recorder(tmp_path)  # as another process or replica would have
        await other.open()
        try:
            outcomes = await asyncio.gather(*[(recorder, other)[n % 2].append([unit("acme", claim("k", f"r{n}"))])
                                              for n in range(10)])
        finally:
            await other.close()
        assert sum(not isinstance(outcome, Exception) for [outcome] in outcomes) == 1
        assert all(isinstance(outcome, AppendRejected) for [outcome] in outcomes if isinstance(outcome, Exception))

    async def test_a_version_5_store_is_upgraded_with_its_remembered_keys_settled(self, tmp_path, recorder):
        await append_ok(recorder, unit("acme", org(), music("r1", idempotency_key="k", request_hash="h1")))
        expected = await projection_tables(recorder)
        await recorder.close()
        async with upgraded_from(self, tmp_path, 5, "ALTER TABLE idempotency_keys DROP COLUMN running_until_us"
                                 ) as upgraded:
            assert await projection_tables(upgraded) == expected
            assert [row[-1] for row in expected["idempotency_keys"]] == [0]
            [taken] = await upgraded.append([unit("acme", claim("k", "r2", "h1"))])
            assert isinstance(taken, AppendRejected)
            assert (await audit.verify(upgraded))[1] == []
