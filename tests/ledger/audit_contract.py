"""The part of the recorder contract about auditing at scale (issue 27), run on every backend.

Mixed into `RecorderContract`. Verification and replay split over worker processes (each opening
the store by its URL) must agree with one process; a replay builds projections beside the live
ones and swaps them in, one table or all; a checkpoint lets the next verification start from it.
"""

import asyncio
import base64

import msgspec
import pytest

from ledger import audit, checkpoints, tree
from ledger.events import Draw
from tests.ledger.ledger_helpers import (
    append_ok, credits, hold, key, org, populate, projection_tables, release, request, unit,
)

ORGS = [f"org{n}" for n in range(6)]
MANY = 11 + len(ORGS) * 8  # populate's events, then each org's (ledger_helpers.populate)


async def populate_many(recorder) -> None:
    """populate's two orgs and six more, each with a key, credits, holds drawn and released, and
    requests: enough streams that two processes each get some."""
    await populate(recorder)
    for name in ORGS:
        drawn = msgspec.structs.replace(request(f"{name}-r1", charged=40, key_id=f"{name}-k"),
                                        draws=(Draw(hold_id=f"{name}-h", amount_inr_nano=30),))
        await append_ok(recorder, unit(name, org(name), key(f"{name}-k"), credits(10_000)))
        await append_ok(recorder, unit(name, hold(f"{name}-h", 100), hold(f"{name}-g", 5)))
        await append_ok(recorder, unit(name, drawn, release(f"{name}-h", 70),
                                       request(f"{name}-r2", charged=7, key_id=f"{name}-k")))


class AuditContract:
    async def test_a_chain_check_in_small_batches_agrees_with_one_in_large(self, recorder):
        # A server checks its checkpoints' chains a few events at a time (gateway.ops.checkpointing).
        await populate_many(recorder)
        small = await audit.verification(recorder, with_projections=False, batch=3)
        large = await audit.verification(recorder, with_projections=False)
        assert (small.checked, small.problems, small.heads) == (large.checked, large.problems, large.heads)
        assert small.checked == MANY and not small.full

    async def test_verify_in_two_processes_agrees_with_one(self, recorder):
        await populate_many(recorder)
        assert await audit.verify(recorder, workers=2) == await audit.verify(recorder) == (MANY, [])

    async def test_verify_in_two_processes_finds_a_projection_row_changed(self, recorder, tmp_path):
        await populate_many(recorder)
        await self.execute_raw(tmp_path, "UPDATE orgs SET spent_inr_nano = spent_inr_nano + 1 WHERE org_id = ?",
                               ["org4"])
        checked, [problem] = await audit.verify(recorder, workers=2)
        assert checked == MANY and problem.startswith("orgs (orgs from ") and " differs: stored (" in problem
        assert "'org4'" in problem

    async def test_verify_in_two_processes_finds_a_changed_event_in_either_half(self, recorder, tmp_path):
        await populate_many(recorder)
        for statement in self.drop_immutability():
            await self.execute_raw(tmp_path, statement)
        for position in (3, MANY - 2):  # one in each process's range of positions
            await self.execute_raw(tmp_path, "UPDATE events SET recorded_at_us = recorded_at_us + 1"
                                             " WHERE position = ?", [position])
        _, problems = await audit.verify(recorder, workers=2)
        assert [p for p in problems if "hash mismatch" in p and p.startswith(("position 3 ", f"position {MANY - 2} "))]
        assert {p.split()[1] for p in problems if p.endswith("hash mismatch")} >= {"3", str(MANY - 2)}

    async def test_verify_in_two_processes_says_where_an_event_is_missing(self, recorder, tmp_path):
        await populate_many(recorder)
        for statement in self.drop_immutability():
            await self.execute_raw(tmp_path, statement)
        await self.execute_raw(tmp_path, "DELETE FROM events WHERE position = 20")
        checked, problems = await audit.verify(recorder, workers=2)
        assert checked == MANY - 1 and problems[0] == "position 21 follows 19: the log has a gap"

    async def test_replay_in_two_processes_rebuilds_identical_rows(self, recorder, tmp_path):
        await populate_many(recorder)
        before = await projection_tables(recorder)
        await self.execute_raw(tmp_path, "DELETE FROM holds WHERE hold_id = ?", ["org5-g"])
        await self.execute_raw(tmp_path, "UPDATE usage_daily SET requests = 99")
        assert await audit.replay(recorder, workers=2) == MANY
        assert await projection_tables(recorder) == before
        assert await audit.verify(recorder, workers=2) == (MANY, [])

    async def test_replay_of_one_projection_leaves_the_others_as_they_are(self, recorder, tmp_path):
        await populate_many(recorder)
        before = await projection_tables(recorder)
        await self.execute_raw(tmp_path, "UPDATE orgs SET credits_inr_nano = 0")
        await self.execute_raw(tmp_path, "UPDATE api_keys SET name = 'forged'")
        assert await audit.replay(recorder, tables=("orgs",)) == MANY
        after = await projection_tables(recorder)
        assert after["orgs"] == before["orgs"] and after["api_keys"] != before["api_keys"]
        _, [problem] = await audit.verify(recorder)
        assert problem.startswith("api_keys: row 0 differs")

    async def test_replay_names_an_unknown_projection(self, recorder):
        with pytest.raises(ValueError, match="no such projection: nope"):
            await audit.replay(recorder, tables=("orgs", "nope"))

    async def test_appends_during_a_replay_in_two_processes_all_land_in_the_swapped_tables(self, recorder):
        await populate_many(recorder)

        async def spend(n: int) -> None:
            await append_ok(recorder, unit(ORGS[n % len(ORGS)], request(f"during-{n}", charged=1,
                                                                        key_id=f"{ORGS[n % len(ORGS)]}-k")))

        replayed, *_ = await asyncio.gather(audit.replay(recorder, workers=2), *(spend(n) for n in range(30)))
        assert MANY <= replayed <= MANY + 30
        spent = await recorder._fetch("SELECT sum(spent_inr_nano), sum(requests) FROM orgs")
        assert [tuple(row) for row in spent] == [(120 + len(ORGS) * 47 + 30, 2 + len(ORGS) * 2 + 30)]
        assert await audit.verify(recorder) == (MANY + 30, [])

    async def test_a_checkpoint_lets_the_next_verification_check_only_what_came_after(self, recorder):
        await populate(recorder)
        first, at = await audit.keep_verified(recorder)  # none yet: everything, projections too
        assert (first.checked, first.problems, first.full, at) == (11, [], True, 12)
        latest = await checkpoints.latest(recorder)
        assert latest is not None and latest.position == 12 and latest.verified.upto == 11
        # A tree head: the log's first 11 events as a Merkle tree, no stream's head (ledger.tree)
        assert (latest.verified.heads, latest.verified.tree_size) == ((), 11)
        assert base64.b64decode(latest.verified.root) == await tree.root(recorder, 11)
        await append_ok(recorder, unit("beta", credits(1)), unit("acme", credits(2)))
        second, at = await audit.keep_verified(recorder)
        assert (second.checked, second.problems, second.full, second.upto, at) == (3, [], False, 14, 15)
        again, at = await audit.keep_verified(recorder)  # nothing new but the checkpoint itself
        assert (again.checked, again.problems, at) == (1, [], None)
        assert await audit.verify(recorder) == (15, [])  # checkpoints are events like any other

    async def test_a_verification_from_a_checkpoint_catches_a_change_after_it_and_a_rewritten_head(
            self, recorder, tmp_path):
        await populate(recorder)
        await audit.keep_verified(recorder)
        await append_ok(recorder, unit("beta", credits(1)))
        for statement in self.drop_immutability():
            await self.execute_raw(tmp_path, statement)
        await self.execute_raw(tmp_path, "UPDATE events SET recorded_at_us = recorded_at_us + 1 WHERE position = 13")
        verified, at = await audit.keep_verified(recorder)
        assert (verified.problems, at) == (["position 13 (stream beta v5): hash mismatch"], None)
        await self.execute_raw(tmp_path, "UPDATE events SET recorded_at_us = recorded_at_us - 1 WHERE position = 13")
        await self.execute_raw(tmp_path, "UPDATE events SET hash = ? WHERE position = 11", [bytes(32)])  # beta v4
        verified, at = await audit.keep_verified(recorder)
        assert at is None and verified.problems[:2] == [
            "stream beta v4: no longer the event the checkpoint at 11 verified",
            "stream beta v4: not the event the tree head at 11 holds"]

    async def test_only_a_full_verification_sees_a_change_inside_the_checkpointed_prefix(self, recorder, tmp_path):
        await populate(recorder)
        await audit.keep_verified(recorder)
        for statement in self.drop_immutability():
            await self.execute_raw(tmp_path, statement)
        await self.execute_raw(tmp_path, "UPDATE events SET recorded_at_us = recorded_at_us + 1 WHERE position = 2")
        assert (await audit.keep_verified(recorder))[0].problems == []  # what a checkpoint is for: not again
        assert (await audit.keep_verified(recorder, incremental=False))[0].problems == [
            "position 2 (stream acme v2): hash mismatch"]
