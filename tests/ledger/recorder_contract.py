"""The contract every ledger backend must meet, written only against the abstract `Recorder`.

Not collected by itself: a backend's test module subclasses `RecorderContract` (in a class
whose name starts with `Test`) and provides the store and the tamper hooks, in the manner of
pyeventsourcing's shared recorder test cases. Nothing here may assume a particular database.
"""

import abc
import asyncio
import hashlib
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from ledger import audit, projections
from ledger.events import RequestCompleted, encode_event
from ledger.events import KeyLimitsSet, ProviderKeyRemoved, ProviderKeySet
from ledger.recorder import (
    GENESIS_HASH, SCHEMA_VERSION, Append, AppendRejected, ConcurrencyError, CorruptEvent,
    InsufficientCredit, Recorder, RecorderClosed, SchemaOutOfDate, Secret, chain_hash,
)
from ledger.writer import GroupCommitWriter
from tests.ledger.audit_contract import AuditContract
from tests.ledger.export_contract import ExportContract
from tests.ledger.budgets_contract import BudgetsContract
from tests.ledger.claims_contract import ClaimsContract
from tests.ledger.leases_contract import LeasesContract
from tests.ledger.queries_contract import QueriesContract
from tests.ledger.statements_contract import StatementsContract
from tests.ledger.tree_contract import TreeContract
from tests.ledger.webhooks_contract import WebhooksContract
from tests.ledger.ledger_helpers import (
    HELLO_POSITION, POPULATED, append_ok, content, credits, expired, hold, key, music, org, populate,
    projection_tables, recorded_of, release, request, retention, revoke, unit, upgraded_from,
)

INT64_MAX = 2**63 - 1


def now_us() -> int:
    return time.time_ns() // 1000


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class RecorderContract(AuditContract, BudgetsContract, ClaimsContract, ExportContract, LeasesContract, TreeContract,
                       QueriesContract, StatementsContract, WebhooksContract, abc.ABC):
    """Shared tests; a subclass provides the backend through the abstract hooks below."""

    # -- what a backend's subclass provides -------------------------------------------------

    @abc.abstractmethod
    def make_recorder(self, tmp_path: Path) -> Recorder:
        """A new, unopened recorder on this test's store (named by tmp_path, initially empty).

        Every call returns another instance on the same store, as another process would have.
        """

    @abc.abstractmethod
    async def execute_raw(self, tmp_path: Path, sql: str, params: Sequence = ()) -> None:
        """Run one statement (qmark placeholders) on the store, outside the ledger, and commit.

        Raises the backend's error if the store refuses it.
        """

    @abc.abstractmethod
    def drop_immutability(self) -> Sequence[str]:
        """The statements that remove what refuses UPDATE and DELETE on the events table."""

    @property
    @abc.abstractmethod
    def refusal(self) -> type[BaseException]:
        """What `execute_raw` raises when the events table refuses an UPDATE or DELETE."""

    # -- fixtures -----------------------------------------------------------------------------

    @pytest.fixture
    async def recorder(self, tmp_path: Path):
        recorder = self.make_recorder(tmp_path)
        await recorder.open()
        yield recorder
        await recorder.close()

    # -- append and read back -----------------------------------------------------------------

    async def test_append_returns_events_with_positions_versions_and_kinds(self, recorder):
        before = now_us()
        outcomes = await recorder.append([unit("acme", org("Acme"), credits(5)),
                                          unit("beta", org("Beta"))])
        after = now_us()
        [a1, a2], [b1] = outcomes
        assert [(r.position, r.stream_id, r.version, r.kind) for r in (a1, a2, b1)] == [
            (1, "acme", 1, "org_created"), (2, "acme", 2, "credits_added"), (3, "beta", 1, "org_created")]
        assert [r.event for r in (a1, a2, b1)] == [org("Acme"), credits(5), org("Beta")]
        assert [r.data for r in (a1, a2, b1)] == [encode_event(e) for e in (org("Acme"), credits(5), org("Beta"))]
        assert all(before <= r.recorded_at_us <= after for r in (a1, a2, b1))

    async def test_read_returns_exactly_what_append_returned(self, recorder):
        outcomes = await recorder.append([unit("acme", org(), key("k1"), credits(7, "top-up")),
                                          unit("beta", org("Beta"), request("r1", charged=3))])
        assert await recorder.read() == recorded_of(outcomes)

    async def test_positions_and_versions_are_gapless_across_calls(self, recorder):
        await append_ok(recorder, unit("acme", org()), unit("beta", org("Beta")))
        await append_ok(recorder, unit("acme", credits(1), credits(2)))
        await append_ok(recorder, unit("beta", credits(3)), unit("acme", credits(4)))
        events = await recorder.read()
        assert [r.position for r in events] == [1, 2, 3, 4, 5, 6]
        assert [(r.stream_id, r.version) for r in events] == [
            ("acme", 1), ("beta", 1), ("acme", 2), ("acme", 3), ("beta", 2), ("acme", 4)]

    async def test_a_recorder_not_open_says_so_as_unavailable(self, tmp_path):
        recorder = self.make_recorder(tmp_path)
        with pytest.raises(RecorderClosed, match="not open"):
            await recorder.read()
        await recorder.open()
        await append_ok(recorder, unit("acme", org()))
        await recorder.close()
        for use in (recorder.read(), recorder.append([unit("acme", credits(5))]), recorder._fetch("SELECT 1")):
            with pytest.raises(RecorderClosed, match="not open"):  # a LedgerUnavailable: a client may retry
                await use

    async def test_appending_no_units_returns_no_outcomes(self, recorder):
        assert await recorder.append([]) == []
        assert await recorder.read() == []

    async def test_read_after_a_position_with_a_limit(self, recorder):
        await append_ok(recorder, unit("acme", org(), *[credits(i) for i in range(1, 7)]))
        assert [r.position for r in await recorder.read(after=2, limit=3)] == [3, 4, 5]
        assert [r.position for r in await recorder.read(after=5)] == [6, 7]
        assert [r.position for r in await recorder.read(limit=1)] == [1]
        assert await recorder.read(after=7) == []

    async def test_read_returns_at_most_1000_by_default(self, recorder):
        await append_ok(recorder, unit("acme", org(), *[credits(i) for i in range(1, 1001)]))
        events = await recorder.read()
        assert [r.position for r in events] == list(range(1, 1001))
        assert [r.position for r in await recorder.read(after=1000)] == [1001]

    async def test_read_stream_returns_one_stream_in_version_order(self, recorder):
        await append_ok(recorder, unit("acme", org()), unit("beta", org("Beta")), unit("acme", credits(1)))
        await append_ok(recorder, unit("acme", credits(2)))
        acme = await recorder.read_stream("acme")
        assert [(r.position, r.version, r.event) for r in acme] == [
            (1, 1, org()), (3, 2, credits(1)), (4, 3, credits(2))]
        assert [r.position for r in await recorder.read_stream("beta")] == [2]
        assert await recorder.read_stream("nobody") == []

    # -- expected versions ----------------------------------------------------------------------

    async def test_expected_version_equal_to_the_streams_version_is_accepted(self, recorder):
        [[created]] = await append_ok(recorder, unit("acme", org(), expected_version=0))
        [[added]] = await append_ok(recorder, unit("acme", credits(1), expected_version=1))
        assert (created.version, added.version) == (1, 2)

    async def test_expected_version_conflict_is_the_units_outcome_and_writes_nothing(self, recorder):
        await append_ok(recorder, unit("acme", org()), unit("beta", org("Beta")))
        stale, fresh = await recorder.append([unit("acme", credits(5), expected_version=0),
                                              unit("beta", credits(7), expected_version=1)])
        assert isinstance(stale, ConcurrencyError)
        assert [(r.position, r.stream_id, r.version) for r in fresh] == [(3, "beta", 2)]
        assert [r.position for r in await recorder.read()] == [1, 2, 3]
        assert [r.version for r in await recorder.read_stream("acme")] == [1]
        assert await recorder._fetch("SELECT org_id, credits_inr_nano FROM orgs ORDER BY org_id") == [
            ("acme", 0), ("beta", 7)]

    async def test_expected_version_of_a_stream_that_does_not_exist_conflicts(self, recorder):
        [outcome] = await recorder.append([unit("acme", org(), expected_version=3)])
        assert isinstance(outcome, ConcurrencyError)
        assert await recorder.read() == []

    async def test_expected_version_counts_earlier_units_of_the_same_call(self, recorder):
        first, second, stale = await recorder.append([
            unit("acme", org(), expected_version=0),
            unit("acme", credits(1), expected_version=1),
            unit("acme", credits(2), expected_version=1)])
        assert [(r.position, r.version) for r in first + second] == [(1, 1), (2, 2)]
        assert isinstance(stale, ConcurrencyError)
        assert [r.event for r in await recorder.read()] == [org(), credits(1)]

    # -- all-or-nothing units -----------------------------------------------------------------

    async def test_unit_repeating_a_request_id_is_rejected_whole_and_the_others_commit(self, recorder):
        await append_ok(recorder, unit("acme", org()), unit("beta", org("Beta")))
        bad = unit("acme", request("r1", charged=5, content_id="c1"), request("r1", charged=6),
                   contents=[content("c1", b"secret")])
        good = unit("beta", request("r2", charged=7, content_id="c2"), contents=[content("c2", b"hi")])
        rejected, accepted = await recorder.append([bad, good])
        assert isinstance(rejected, AppendRejected)
        assert [(r.position, r.stream_id, r.version) for r in accepted] == [(3, "beta", 2)]
        assert [r.version for r in await recorder.read_stream("acme")] == [1]
        assert await recorder._fetch("SELECT request_id FROM request_log") == [("r2",)]
        assert await recorder._fetch("SELECT content_id FROM content") == [("c2",)]
        assert await recorder._fetch("SELECT org_id, spent_inr_nano, requests FROM orgs ORDER BY org_id") == [
            ("acme", 0, 0), ("beta", 7, 1)]

    async def test_request_id_recorded_by_an_earlier_call_is_rejected(self, recorder):
        await append_ok(recorder, unit("acme", org()), unit("beta", org("Beta")))
        [[first]] = await append_ok(recorder, unit("acme", request("r1", charged=5)))
        again, other = await recorder.append([
            unit("acme", request("r1", charged=9, content_id="c9"), contents=[content("c9", b"x")]),
            unit("beta", credits(3))])
        assert isinstance(again, AppendRejected)
        assert [(r.position, r.stream_id) for r in other] == [(4, "beta")]
        assert await recorder._fetch("SELECT request_id, position, charged_inr_nano FROM request_log") == [
            ("r1", first.position, 5)]
        assert await recorder._fetch("SELECT content_id FROM content") == []
        assert await recorder._fetch("SELECT org_id, spent_inr_nano, requests FROM orgs ORDER BY org_id") == [
            ("acme", 5, 1), ("beta", 0, 0)]
        assert [r.position for r in await recorder.read()] == [1, 2, 3, 4]

    async def test_request_id_repeated_by_a_later_unit_of_the_same_call_is_rejected(self, recorder):
        await append_ok(recorder, unit("acme", org()), unit("beta", org("Beta")))
        first, second = await recorder.append([unit("acme", request("r1", charged=5)),
                                               unit("beta", request("r1", charged=6))])
        assert [(r.position, r.stream_id) for r in first] == [(3, "acme")]
        assert isinstance(second, AppendRejected)
        assert await recorder._fetch("SELECT request_id, org_id FROM request_log") == [("r1", "acme")]

    async def test_content_id_recorded_before_is_rejected(self, recorder):
        await append_ok(recorder, unit("acme", org(), request("r1", content_id="c1"),
                                       contents=[content("c1", b"first")]))
        [outcome] = await recorder.append([unit("acme", request("r2", content_id="c1"),
                                                contents=[content("c1", b"second")])])
        assert isinstance(outcome, AppendRejected)
        assert await recorder._fetch("SELECT content_id, body FROM content") == [("c1", b"first")]
        assert await recorder._fetch("SELECT request_id FROM request_log") == [("r1",)]

    async def test_amount_beyond_64_bits_is_rejected_alone(self, recorder):
        await append_ok(recorder, unit("acme", org()), unit("beta", org("Beta")))
        huge, small = await recorder.append([unit("acme", credits(INT64_MAX + 1)),
                                             unit("beta", credits(INT64_MAX))])
        assert isinstance(huge, AppendRejected)
        assert [(r.position, r.stream_id) for r in small] == [(3, "beta")]
        assert await recorder._fetch("SELECT org_id, credits_inr_nano FROM orgs ORDER BY org_id") == [
            ("acme", 0), ("beta", INT64_MAX)]

    @pytest.mark.parametrize("bad", [
        request("r-neg", charged=-630_000_000_000), request("r-cost", cost_inr_nano=-1),
        request("r-usd", cost_usd_nano=-1), request("r-in", prompt_tokens=-50_000_000),
        request("r-out", completion_tokens=-1), credits(0), credits(-5), hold("h0", 0), hold("h-", -1),
        release("h0", 0), release("h-", -7)], ids=lambda event: type(event).__name__)
    async def test_a_negative_charge_or_a_credit_moving_no_money_is_rejected_alone(self, recorder, bad):
        # The last line of defence: no upstream number or admin slip can mint credit.
        await append_ok(recorder, unit("acme", org(), credits(100)), unit("beta", org("Beta")))
        rejected, accepted = await recorder.append([unit("acme", request("r-ok", charged=1), bad),
                                                    unit("beta", credits(3))])
        assert isinstance(rejected, AppendRejected)
        assert [(r.position, r.stream_id) for r in accepted] == [(4, "beta")]
        assert [r.version for r in await recorder.read_stream("acme")] == [1, 2]
        assert await recorder._fetch("SELECT count(*) FROM request_log") == [(0,)]
        assert await recorder._fetch(
            "SELECT org_id, credits_inr_nano, spent_inr_nano, held_inr_nano FROM orgs ORDER BY org_id") == [
            ("acme", 100, 0, 0), ("beta", 3, 0, 0)]
        assert (await audit.verify(recorder))[1] == []

    async def test_a_free_request_and_the_smallest_amounts_are_accepted(self, recorder):
        await append_ok(recorder, unit("acme", org(), credits(1)))
        await append_ok(recorder, unit("acme", request("r0", charged=0, status=502), hold("h1", 1)))
        await append_ok(recorder, unit("acme", release("h1", 1), request("r1", charged=1)))
        assert await recorder._fetch("SELECT spent_inr_nano, held_inr_nano FROM orgs") == [(1, 0)]

    # -- hash chain -----------------------------------------------------------------------------

    async def test_first_event_of_a_stream_links_to_the_genesis_hash(self, recorder):
        [[first]] = await append_ok(recorder, unit("acme", org()))
        assert first.hash == chain_hash(GENESIS_HASH, 1, "acme", 1, "org_created",
                                        first.recorded_at_us, first.data)
        assert len(first.hash) == 32

    async def test_each_hash_links_to_the_previous_event_of_its_stream(self, recorder):
        await append_ok(recorder, unit("acme", org(), credits(1)), unit("beta", org("Beta")))
        await append_ok(recorder, unit("beta", credits(2)), unit("acme", credits(3)))
        events = await recorder.read()
        previous: dict[str, bytes] = {}
        for r in events:
            assert r.hash == chain_hash(previous.get(r.stream_id, GENESIS_HASH), r.position,
                                        r.stream_id, r.version, r.kind, r.recorded_at_us, r.data)
            previous[r.stream_id] = r.hash
        assert (len(events), sorted(previous)) == (5, ["acme", "beta"])

    # -- content and projections ------------------------------------------------------------------

    async def test_content_is_written_with_its_unit(self, recorder):
        body = b"prompt and response"
        await append_ok(recorder, unit("acme", org(), request("r1", content_id="c1",
                                                              content_hash=hashlib.sha256(body).hexdigest()),
                                       contents=[content("c1", body)]))
        assert await recorder._fetch("SELECT content_id, stream_id, sha256, body FROM content") == [
            ("c1", "acme", hashlib.sha256(body).hexdigest(), body)]

    async def test_orgs_projection_sums_credits_spend_and_requests(self, recorder):
        [[created, *_]] = await append_ok(recorder, unit("acme", org("Acme", "none"), credits(1_000), credits(500)))
        await append_ok(recorder, unit("acme", retention("retain"), request("r1", charged=120),
                                       request("r2", charged=30, status=502, error="upstream")))
        assert await recorder._fetch(
            "SELECT org_id, name, retention, created_at_us, credits_inr_nano, spent_inr_nano, requests"
            " FROM orgs") == [("acme", "Acme", "retain", created.recorded_at_us, 1_500, 150, 2)]

    async def test_projection_of_one_call_follows_event_order(self, recorder):
        await append_ok(recorder, unit("acme", org("Acme")), unit("acme", credits(5)),
                        unit("acme", retention("none"), retention("retain"), retention("none")))
        assert await recorder._fetch("SELECT retention, credits_inr_nano FROM orgs") == [("none", 5)]

    async def test_api_keys_projection_records_creation_and_first_revocation(self, recorder):
        [[_, k1, k2]] = await append_ok(recorder, unit("acme", org(), key("k1", name="ci"), key("k2", admin=True)))
        [[revoked]] = await append_ok(recorder, unit("acme", revoke("k1")))
        await append_ok(recorder, unit("acme", revoke("k1")))
        assert await recorder._fetch(
            "SELECT key_id, org_id, key_hash, prefix, name, admin, created_at_us, revoked_at_us"
            " FROM api_keys ORDER BY key_id") == [
            ("k1", "acme", sha256_hex("k1"), "k1", "ci", 0, k1.recorded_at_us, revoked.recorded_at_us),
            ("k2", "acme", sha256_hex("k2"), "k2", "", 1, k2.recorded_at_us, None)]

    async def test_a_revocation_in_another_orgs_stream_does_not_revoke_the_key(self, recorder):
        await append_ok(recorder, unit("acme", org(), key("k1")), unit("evil", org("Evil")))
        await append_ok(recorder, unit("evil", revoke("k1")))
        assert await recorder._fetch("SELECT revoked_at_us FROM api_keys WHERE key_id = 'k1'") == [(None,)]
        assert (await audit.verify(recorder))[1] == []  # and a replay agrees

    async def test_request_log_row_carries_every_field_of_the_event(self, recorder):
        event = RequestCompleted(
            request_id="r1", key_id="k1", route="/v1/chat/completions", model="gpt-test",
            provider="sim", status=200, stream=True, prompt_tokens=11, completion_tokens=22,
            cost_usd_nano=33, cost_inr_nano=2_805, charged_inr_nano=2_806, usd_to_inr="85.00",
            latency_ms=44, error="", content_id="c1", content_hash="ignored")
        [[_, done]] = await append_ok(recorder, unit("acme", org(), event))
        assert await recorder._fetch(
            "SELECT request_id, org_id, position, key_id, created_at_us, route, model, provider, status,"
            " stream, prompt_tokens, completion_tokens, cost_usd_nano, cost_inr_nano, charged_inr_nano,"
            " usd_to_inr, latency_ms, error, content_id FROM request_log") == [
            ("r1", "acme", 2, "k1", done.recorded_at_us, "/v1/chat/completions", "gpt-test", "sim",
             200, 1, 11, 22, 33, 2_805, 2_806, "85.00", 44, "", "c1")]

    # -- fetch, snapshot, scratch -------------------------------------------------------------------

    async def test_fetch_runs_a_query_with_qmark_parameters(self, recorder):
        await append_ok(recorder, unit("acme", org("Acme")), unit("beta", org("Beta")))
        assert await recorder._fetch("SELECT name FROM orgs WHERE org_id = ?", ["beta"]) == [("Beta",)]
        assert await recorder._fetch("SELECT COUNT(*) FROM orgs") == [(2,)]
        assert await recorder._fetch("SELECT name FROM orgs WHERE org_id = ?", ("nobody",)) == []

    async def test_snapshot_keeps_one_state_while_an_append_commits(self, recorder):
        await append_ok(recorder, unit("acme", org(), credits(5)))
        async with recorder.snapshot():
            assert [r.position for r in await recorder.read()] == [1, 2]
            await append_ok(recorder, unit("acme", credits(7)))
            assert [r.position for r in await recorder.read()] == [1, 2]
            assert [r.version for r in await recorder.read_stream("acme")] == [1, 2]
            assert await recorder._fetch("SELECT credits_inr_nano FROM orgs") == [(5,)]
        assert [r.position for r in await recorder.read()] == [1, 2, 3]
        assert await recorder._fetch("SELECT credits_inr_nano FROM orgs") == [(12,)]

    async def test_snapshots_entered_concurrently_both_complete(self, recorder):
        await append_ok(recorder, unit("acme", org()))

        async def look() -> list[int]:
            async with recorder.snapshot():
                await asyncio.sleep(0.01)
                return [r.position for r in await recorder.read()]

        assert await asyncio.gather(look(), look()) == [[1], [1]]

    async def test_a_snapshot_pins_only_the_reads_of_the_task_that_took_it(self, recorder):
        # A server verifying its checkpoints (gateway.ops.checkpointing) must go on seeing new keys,
        # revocations and balances in every other task while the verification reads its snapshot.
        await append_ok(recorder, unit("acme", org()))
        entered, appended = asyncio.Event(), asyncio.Event()

        async def audit() -> list[int]:
            async with recorder.snapshot():
                entered.set()
                await appended.wait()
                return [r.position for r in await recorder.read()]

        auditing = asyncio.create_task(audit())
        await entered.wait()
        await append_ok(recorder, unit("acme", credits(5)))
        assert [r.position for r in await recorder.read()] == [1, 2]
        assert await recorder._fetch("SELECT credits_inr_nano FROM orgs") == [(5,)]
        appended.set()
        assert await auditing == [1]

    async def test_scratch_is_a_new_empty_store(self, recorder):
        await populate(recorder)
        scratch = recorder.scratch()
        await scratch.open()
        try:
            assert await scratch.read() == []
            assert await projection_tables(scratch) == {table: [] for table in projections.TABLES}
        finally:
            await scratch.close()
        assert len(await recorder.read()) == POPULATED

    # -- verify and replay ------------------------------------------------------------------------

    async def test_verify_passes_on_a_healthy_ledger(self, recorder):
        await populate(recorder)
        assert await audit.verify(recorder) == (POPULATED, [])

    async def test_replay_rebuilds_identical_projection_rows(self, recorder):
        await populate(recorder)
        before = await projection_tables(recorder)
        assert await audit.replay(recorder) == POPULATED
        assert await projection_tables(recorder) == before

    async def test_replay_repairs_a_corrupted_projection_row(self, recorder, tmp_path):
        await populate(recorder)
        before = await projection_tables(recorder)
        await self.execute_raw(tmp_path, "UPDATE orgs SET credits_inr_nano = credits_inr_nano + 1"
                                         " WHERE org_id = ?", ["acme"])
        corrupted = await projection_tables(recorder)
        assert corrupted["orgs"] != before["orgs"]
        checked, problems = await audit.verify(recorder)
        assert (checked, problems) == (POPULATED, [
            f"orgs: row 0 differs: stored {corrupted['orgs'][0]!r} != replayed {before['orgs'][0]!r}"])
        assert await audit.replay(recorder) == POPULATED
        assert await projection_tables(recorder) == before
        assert await audit.verify(recorder) == (POPULATED, [])

    async def test_verify_compares_projections_page_by_page(self, recorder, tmp_path):
        """Verify holds a page of each copy at a time: a difference on a later page is found by
        its row number, and a missing row by the tables' counts, with pages of one row."""
        await populate(recorder)
        tables = await projection_tables(recorder)
        await self.execute_raw(tmp_path, "UPDATE orgs SET credits_inr_nano = credits_inr_nano + 1"
                                         " WHERE org_id = ?", ["beta"])
        await self.execute_raw(tmp_path, "DELETE FROM api_keys WHERE key_id = ?", ["k2"])
        corrupted = await projection_tables(recorder)
        scratch = recorder.scratch()
        await scratch.open()
        try:
            await scratch.rebuild(audit.batches(recorder))
            for table in projections.TABLES:  # every key's shape, paged by one and by two rows
                for page in (1, 2):
                    assert await audit.first_difference(table, scratch, scratch, page=page) is None
            assert await audit.first_difference("orgs", recorder, scratch, page=1) == (
                f"orgs: row 1 differs: stored {corrupted['orgs'][1]!r} != replayed {tables['orgs'][1]!r}")
            assert await audit.first_difference("api_keys", recorder, scratch, page=1) == (
                "api_keys: 1 stored rows != 2 replayed rows")
        finally:
            await scratch.close()

    async def test_replay_keeps_the_projection_of_an_append_made_meanwhile(self, recorder):
        await populate(recorder)
        replayed, [[added]] = await asyncio.gather(
            audit.replay(recorder), recorder.append([unit("beta", credits(7))]))
        assert replayed in (POPULATED, POPULATED + 1)
        assert added.position == POPULATED + 1
        assert await recorder._fetch("SELECT credits_inr_nano FROM orgs WHERE org_id = ?", ["beta"]) == [(12,)]
        assert await audit.verify(recorder) == (POPULATED + 1, [])

    async def test_events_refuse_update_and_delete_then_verify_finds_a_one_byte_change(self, recorder, tmp_path):
        await populate(recorder)
        original = await recorder.read()
        with pytest.raises(self.refusal):
            await self.execute_raw(tmp_path, "UPDATE events SET recorded_at_us = recorded_at_us + 1"
                                             " WHERE position = ?", [HELLO_POSITION])
        with pytest.raises(self.refusal):
            await self.execute_raw(tmp_path, "DELETE FROM events WHERE position = ?", [HELLO_POSITION])
        assert await recorder.read() == original

        for statement in self.drop_immutability():
            await self.execute_raw(tmp_path, statement)
        hello = original[HELLO_POSITION - 1]
        tampered = hello.data.replace(b'"hello"', b'"hellp"')
        assert sum(a != b for a, b in zip(hello.data, tampered, strict=True)) == 1
        await self.execute_raw(tmp_path, "UPDATE events SET data = ? WHERE position = ?",
                               [tampered, HELLO_POSITION])
        assert (await recorder.read(after=HELLO_POSITION - 1, limit=1))[0].event == credits(1_000_000_000, "hellp")
        assert await audit.verify(recorder) == (
            POPULATED, [f"position {HELLO_POSITION} (stream acme v4): hash mismatch"])

    async def test_an_event_that_no_longer_decodes_is_reported_as_corrupt(self, recorder, tmp_path):
        await populate(recorder)
        for statement in self.drop_immutability():
            await self.execute_raw(tmp_path, statement)
        await self.execute_raw(tmp_path, "UPDATE events SET data = ? WHERE position = ?",
                               [b'{"type":"credits_added","amount_inr_nano":"lots"}', HELLO_POSITION])
        with pytest.raises(CorruptEvent, match=f"position {HELLO_POSITION}"):
            await recorder.read()
        _checked, [problem] = await audit.verify(recorder)
        assert f"position {HELLO_POSITION}" in problem

    # -- group commit ---------------------------------------------------------------------------

    async def test_group_commit_from_500_tasks_batches_and_keeps_streams_in_order(self, recorder):
        orgs = [f"org{n}" for n in range(5)]
        await append_ok(recorder, *[unit(o, org(o)) for o in orgs])
        writer = GroupCommitWriter(recorder)
        writer.start()
        try:
            results = await asyncio.gather(*(
                writer.append(unit(orgs[i % 5], request(f"r{i}", charged=i))) for i in range(500)))
        finally:
            await writer.close()
        assert writer.largest_batch > 1
        assert [(r.stream_id, r.event) for [r] in results] == [
            (orgs[i % 5], request(f"r{i}", charged=i)) for i in range(500)]
        assert [r.position for r in await recorder.read(limit=1000)] == list(range(1, 506))
        for n, o in enumerate(orgs):
            stream = await recorder.read_stream(o)
            assert [r.version for r in stream] == list(range(1, 102))
            assert [r.event.request_id for r in stream[1:]] == [f"r{i}" for i in range(n, 500, 5)]
        assert await recorder._fetch("SELECT org_id, spent_inr_nano, requests FROM orgs ORDER BY org_id") == [
            (o, sum(range(n, 500, 5)), 100) for n, o in enumerate(orgs)]
        assert await audit.verify(recorder) == (505, [])

    # -- durability across instances ----------------------------------------------------------------

    async def test_a_reopened_recorder_sees_everything_and_continues_the_chain(self, tmp_path):
        first = self.make_recorder(tmp_path)
        await first.open()
        await populate(first)
        events, tables = await first.read(), await projection_tables(first)
        await first.close()

        second = self.make_recorder(tmp_path)
        await second.open()
        try:
            assert await second.read() == events
            assert await projection_tables(second) == tables
            [[added]] = await append_ok(second, unit("acme", credits(1)))
            head = [r for r in events if r.stream_id == "acme"][-1]
            assert (added.position, added.version) == (POPULATED + 1, head.version + 1)
            assert added.hash == chain_hash(head.hash, added.position, "acme", added.version,
                                            added.kind, added.recorded_at_us, added.data)
            assert await audit.verify(second) == (POPULATED + 1, [])
        finally:
            await second.close()

    async def test_another_instance_on_the_same_store_sees_appends_at_once(self, recorder, tmp_path):
        other = self.make_recorder(tmp_path)
        await other.open()
        try:
            [[created]] = await append_ok(recorder, unit("acme", org()))
            assert await other.read() == [created]
            [[added]] = await append_ok(other, unit("acme", credits(3)))
            assert (added.position, added.version) == (2, 2)
            assert await recorder.read() == [created, added]
        finally:
            await other.close()

    # -- holds: reserved credit can never exceed what is available ------------------------------

    async def test_a_hold_beyond_the_available_balance_is_rejected_alone(self, recorder):
        await append_ok(recorder, unit("acme", org(), credits(100)))
        outcomes = await recorder.append([
            unit("acme", hold("h1", 60)), unit("acme", hold("h2", 60)), unit("acme", credits(1))])
        assert isinstance(outcomes[1], InsufficientCredit)
        assert not isinstance(outcomes[0], Exception) and not isinstance(outcomes[2], Exception)
        assert await recorder._fetch("SELECT held_inr_nano, credits_inr_nano FROM orgs") == [(60, 101)]

    async def test_credit_added_in_the_same_call_does_not_yet_cover_a_hold(self, recorder):
        # Availability is read once per transaction, before it: conservative, never overspends.
        outcomes = await recorder.append([unit("acme", org(), credits(100)), unit("acme", hold("h1", 1))])
        assert isinstance(outcomes[1], InsufficientCredit)

    async def test_settling_a_hold_moves_it_to_spend_and_frees_nothing_extra(self, recorder):
        await append_ok(recorder, unit("acme", org(), credits(100)))
        await append_ok(recorder, unit("acme", hold("h1", 40)))
        await append_ok(recorder, unit("acme", release("h1", 40), request("r1", charged=40)))
        assert await recorder._fetch("SELECT held_inr_nano, spent_inr_nano FROM orgs") == [(0, 40)]
        outcomes = await recorder.append([unit("acme", hold("h2", 61))])
        assert isinstance(outcomes[0], InsufficientCredit)

    async def test_concurrent_holds_through_the_writer_admit_exactly_what_the_balance_covers(self, recorder):
        await append_ok(recorder, unit("acme", org(), credits(5 * 70)))
        writer = GroupCommitWriter(recorder)
        writer.start()
        results = await asyncio.gather(*[writer.append(unit("acme", hold(f"h{i}", 70))) for i in range(12)],
                                       return_exceptions=True)
        await writer.close()
        assert sum(not isinstance(r, Exception) for r in results) == 5
        assert all(isinstance(r, InsufficientCredit) for r in results if isinstance(r, Exception))

    async def test_music_tracks_and_idempotency_keys_are_projected(self, recorder):
        await append_ok(recorder, unit("acme", org()))
        [[_track]] = await append_ok(recorder, unit("acme", music("r1", idempotency_key="k", request_hash="h1")))
        await append_ok(recorder, unit("acme", music("r2", idempotency_key="k", request_hash="h2")))
        assert await recorder._fetch("SELECT request_id, org_id, storage, object_key, size, expired_at_us"
                                    " FROM music_tracks ORDER BY position") == [
            ("r1", "acme", "s3", "acme/r1.mp3", 3, None), ("r2", "acme", "s3", "acme/r2.mp3", 3, None)]
        assert await recorder._fetch("SELECT request_hash, request_id FROM idempotency_keys") == [("h2", "r2")]
        assert (await audit.verify(recorder))[1] == []

    async def test_media_expired_marks_its_track_once_and_a_second_mark_is_rejected(self, recorder):
        await append_ok(recorder, unit("acme", org(), music("r1"), music("r2")))
        [[mark]] = await append_ok(recorder, unit("acme", expired("r1")))
        again = await recorder.append([unit("acme", expired("r1")), unit("acme", expired("r2"))])
        assert isinstance(again[0], AppendRejected) and not isinstance(again[1], Exception)
        assert await recorder._fetch("SELECT request_id, expired_at_us FROM music_tracks ORDER BY request_id") == [
            ("r1", mark.recorded_at_us), ("r2", again[1][0].recorded_at_us)]
        assert len([r for r in await recorder.read() if r.kind == "media_expired"]) == 2
        assert (await audit.verify(recorder))[1] == []

    async def test_replay_of_a_track_and_its_expiry_in_one_batch_marks_it(self, recorder):
        await append_ok(recorder, unit("acme", org(), music("r1"), expired("r1")))
        before = await projection_tables(recorder)
        await audit.replay(recorder)
        assert await projection_tables(recorder) == before
        assert (await recorder._fetch("SELECT expired_at_us FROM music_tracks"))[0][0] is not None

    async def test_remove_text_purges_old_bodies_oldest_first_and_chains_still_verify(self, recorder):
        await append_ok(recorder, unit("acme", org()))
        for n in range(3):
            await append_ok(recorder, unit("acme", request(f"r{n}", content_id=f"c{n}"),
                                           contents=[content(f"c{n}", b"text %d" % n)]))
        times = dict(await recorder._fetch("SELECT content_id, created_at_us FROM content"))
        assert await recorder.remove_text(times["c2"], now_us(), limit=1) == 1
        assert await recorder.remove_text(times["c2"], now_us()) == 1
        assert await recorder.remove_text(times["c2"], now_us()) == 0
        rows = await recorder._fetch("SELECT content_id, body, removed_at_us IS NOT NULL FROM content"
                                    " ORDER BY content_id")
        assert rows == [("c0", None, 1), ("c1", None, 1), ("c2", b"text 2", 0)]
        assert (await audit.verify(recorder))[1] == []

    async def test_secrets_are_kept_beside_the_events_and_follow_their_unit(self, recorder):
        def set_key(fingerprint: str, sealed: bytes) -> Append:
            return Append("acme", [ProviderKeySet(provider="openai", fingerprint=fingerprint)],
                          secrets=[Secret("openai", sealed)])
        await append_ok(recorder, unit("acme", org()))
        await append_ok(recorder, set_key("fp1", b"sealed-1"))
        await append_ok(recorder, set_key("fp2", b"sealed-2"))  # a new key replaces the old one
        assert await recorder._fetch("SELECT org_id, provider, fingerprint FROM provider_keys") == [
            ("acme", "openai", "fp2")]
        assert await recorder._fetch("SELECT stream_id, name, sealed FROM secrets") == [
            ("acme", "openai", b"sealed-2")]
        assert all(b"sealed" not in r.data for r in await recorder.read())  # never in an event

        await append_ok(recorder, Append("acme", [ProviderKeyRemoved(provider="openai")],
                                         secrets=[Secret("openai", None)]))
        assert await recorder._fetch("SELECT * FROM provider_keys") == []
        assert await recorder._fetch("SELECT * FROM secrets") == []
        assert (await audit.verify(recorder))[1] == []

    async def test_a_rejected_unit_leaves_its_secret_unwritten(self, recorder):
        await append_ok(recorder, unit("acme", org()))
        [outcome] = await recorder.append([Append(
            "acme", [ProviderKeySet(provider="openai", fingerprint="fp")], expected_version=99,
            secrets=[Secret("openai", b"sealed")])])
        assert isinstance(outcome, ConcurrencyError)
        assert await recorder._fetch("SELECT * FROM secrets") == []

    async def test_a_store_without_the_schema_is_refused_unless_the_open_migrates(self, tmp_path):
        with pytest.raises(SchemaOutOfDate, match="gateway ledger migrate"):
            await self.make_recorder(tmp_path).open(migrate=False)
        for _ in range(2):  # migrating is idempotent
            migrating = self.make_recorder(tmp_path)
            await migrating.open()
            await migrating.close()
        checked = self.make_recorder(tmp_path)
        await checked.open(migrate=False)
        try:
            assert await checked._fetch("SELECT version FROM ledger_schema") == [(SCHEMA_VERSION,)]
        finally:
            await checked.close()

    async def test_key_limits_are_projected_for_the_streams_own_keys_only(self, recorder):
        await append_ok(recorder, unit("acme", org(), key("k1"), KeyLimitsSet(key_id="k1", requests_per_minute=5)))
        await append_ok(recorder, unit("acme", KeyLimitsSet(key_id="k1", requests_per_minute=7, tokens_per_minute=90)))
        await append_ok(recorder, unit("evil", org(), KeyLimitsSet(key_id="k1", requests_per_minute=1)))
        limits = await recorder._fetch("SELECT key_id, org_id, requests_per_minute, tokens_per_minute FROM key_limits")
        assert limits == [("k1", "acme", 7, 90)]
        assert (await audit.verify(recorder))[1] == []

    async def test_requests_roll_up_per_org_day_route_model_and_status_and_touch_their_key(self, recorder):
        await append_ok(recorder, unit("acme", org(), key("k1"), key("k2")), unit("beta", org(), key("b1")))
        await append_ok(recorder, unit("acme", request("r1", charged=100, prompt_tokens=3, completion_tokens=2,
                                                       cost_usd_nano=7)),
                        unit("acme", request("r2", charged=50, prompt_tokens=1, cost_usd_nano=4)),
                        unit("acme", request("r3", status=502, error="upstream failed")),
                        unit("beta", request("r4", key_id="b1", charged=9)))
        [(at,)] = await recorder._fetch("SELECT recorded_at_us FROM events WHERE position = 6")
        day = at // projections.US_PER_DAY
        assert await recorder._fetch("SELECT * FROM usage_daily ORDER BY org_id, status") == [
            ("acme", day, "/v1/chat/completions", "gpt-test", 200, 2, 4, 2, 11, 150),
            ("acme", day, "/v1/chat/completions", "gpt-test", 502, 1, 0, 0, 0, 0),
            ("beta", day, "/v1/chat/completions", "gpt-test", 200, 1, 0, 0, 0, 9)]
        assert await recorder._fetch("SELECT key_id, last_used_at_us FROM api_keys ORDER BY key_id") == [
            ("b1", at), ("k1", at), ("k2", None)]
        assert (await audit.verify(recorder))[1] == []

    async def test_a_version_4_store_is_upgraded_with_its_rollups_filled_from_the_log(self, tmp_path, recorder):
        await populate(recorder)
        await append_ok(recorder, unit("acme", request("r5", key_id="k2", charged=3)))
        expected = await projection_tables(recorder)
        await recorder.close()
        async with upgraded_from(self, tmp_path, 4, "DROP TABLE usage_daily", "DROP TABLE key_spend_daily",
                                 "DROP TABLE key_budgets", "ALTER TABLE api_keys DROP COLUMN held_inr_nano",
                                 "ALTER TABLE api_keys DROP COLUMN last_used_at_us") as upgraded:
            assert await projection_tables(upgraded) == expected
            assert expected["usage_daily"] and any(row[8] for row in expected["api_keys"])  # last_used_at_us
            assert (await audit.verify(upgraded))[1] == []
