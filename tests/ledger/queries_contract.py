"""The part of the recorder contract about the read API (ledger.queries, ledger.log_queries),
run on every backend with data appended through the recorder.

Mixed into `RecorderContract`, so it uses that class's `recorder` fixture. Each query the
gateway and the sweeper use is tested here once, against real rows.
"""

import pytest
from msgspec.structs import replace

from ledger import log_queries, queries
from ledger.events import CreditsHeld, Draw, HoldReleased, KeyLimitsSet, ProviderKeySet
from ledger.projections import US_PER_DAY
from ledger.recorder import Append, DatabaseError, Secret
from tests.ledger.ledger_helpers import (
    append_ok, claim, content, credits, expired, hold, key, music, org, request, revoke, unit,
)


async def two_orgs(recorder) -> None:
    """acme (keys k1 revoked, k2 admin; 9 credits held 2) and beta (key k3)."""
    await append_ok(recorder, unit("acme", org("Acme"), key("k1", name="ci"), key("k2", admin=True), credits(9)),
                    unit("beta", org("Beta", "none"), key("k3")))
    await append_ok(recorder, unit("acme", revoke("k1")), unit("acme", hold("h", 2)))


async def three_requests(recorder) -> list:
    """acme: r1 (200, /v1/chat/completions, with text c1), r2 (502, embeddings), r3 (200); beta: r9."""
    await append_ok(recorder, unit("acme", org()), unit("beta", org("Beta")))
    [[r1], [r9]] = await append_ok(
        recorder, unit("acme", request("r1", charged=5, prompt_tokens=3, content_id="c1"),
                       contents=[content("c1", b'{"request": 1}')]),
        unit("beta", request("r9")))
    [[r2, r3]] = await append_ok(recorder, unit("acme", replace(request("r2", status=502, error="upstream failed"),
                                                                        route="/v1/embeddings"), request("r3")))
    return [r1, r2, r3, r9]


class QueriesContract:
    async def test_ping_and_the_last_position(self, recorder):
        await queries.ping(recorder)
        assert await queries.last_position(recorder) == 0
        await append_ok(recorder, unit("acme", org(), credits(1)))
        assert await queries.last_position(recorder) == 2

    async def test_orgs_with_their_balances(self, recorder):
        await two_orgs(recorder)
        acme = queries.Org("acme", "Acme", "retain", 9, 0, 2)
        assert await queries.org(recorder, "acme") == acme
        assert await queries.org(recorder, "nobody") is None
        assert sorted(await queries.orgs(recorder)) == [acme, queries.Org("beta", "Beta", "none", 0, 0, 0)]

    async def test_api_keys_of_an_org_newest_first_and_one_key_of_any_org(self, recorder):
        await two_orgs(recorder)
        k1, k2 = await queries.api_key(recorder, "k1"), await queries.api_key(recorder, "k2")
        assert (k1.org_id, k1.name, k1.admin, k1.last_used_at_us) == ("acme", "ci", False, None)
        assert k1.revoked_at_us is not None and k2.revoked_at_us is None and k2.admin is True
        assert await queries.org_api_keys(recorder, "acme") in ([k1, k2], [k2, k1])
        assert await queries.org_api_keys(recorder, "beta") == [await queries.api_key(recorder, "k3")]
        assert await queries.api_key(recorder, "k9") is None

    async def test_active_keys_leave_out_revoked_ones(self, recorder):
        await two_orgs(recorder)
        active = sorted(await queries.active_keys(recorder))
        assert [(k.key_id, k.org_id, k.admin) for k in active] == [("k2", "acme", True), ("k3", "beta", False)]
        assert all(len(k.key_hash) == 64 for k in active)

    async def test_key_limits_and_provider_keys(self, recorder):
        await two_orgs(recorder)
        await append_ok(recorder, unit("acme", KeyLimitsSet(key_id="k2", requests_per_minute=5, tokens_per_minute=0),
                                       ProviderKeySet(provider="openai", fingerprint="f1")))
        assert await queries.key_limits(recorder) == [queries.KeyLimits("k2", 5, 0)]
        assert await queries.provider_keys(recorder) == [queries.ProviderKey("acme", "openai", "f1")]
        assert await queries.has_provider_key(recorder, "acme", "openai")
        assert not await queries.has_provider_key(recorder, "beta", "openai")

    async def test_a_sealed_secret_comes_back_as_bytes(self, recorder):
        await append_ok(recorder, unit("acme", org()),
                        Append("acme", [ProviderKeySet(provider="openai", fingerprint="f")],
                               secrets=[Secret("openai", b"\x00sealed")]))
        assert await queries.sealed_secret(recorder, "acme", "openai") == b"\x00sealed"
        assert await queries.sealed_secret(recorder, "acme", "google") is None

    async def test_an_idempotency_keys_use(self, recorder):
        await append_ok(recorder, unit("acme", org()))
        [[claimed]] = await append_ok(recorder, unit("acme", claim("k", "r1", request_hash="h", lease_us=10)))
        at = claimed.recorded_at_us
        assert await queries.key_use(recorder, "acme", "k") == queries.KeyUse("h", "r1", at, at + 10)
        assert await queries.key_use(recorder, "beta", "k") is None

    async def test_the_usage_rollup_from_a_day_on(self, recorder):
        r1, r2, _, _ = await three_requests(recorder)
        day = r1.recorded_at_us // US_PER_DAY
        rows = await queries.daily_usage(recorder, "acme", day)
        by_status = {(row.route, row.status): row for row in rows}
        if r2.recorded_at_us // US_PER_DAY == day:  # not across midnight: one row per route and status
            assert len(rows) == 2 and by_status[("/v1/chat/completions", 200)].requests == 2
            assert by_status[("/v1/embeddings", 502)] == queries.DailyUsage(
                day, "/v1/embeddings", "gpt-test", 502, 1, 0, 0, 0, 0)
        assert sum(row.requests for row in rows) == 3 and sum(row.charged_inr_nano for row in rows) == 5
        assert sum(row.prompt_tokens for row in rows) == 3
        assert await queries.daily_usage(recorder, "acme", day + 2) == []
        assert await queries.daily_usage(recorder, "beta", day + 2) == []

    async def test_hosted_tracks_due_in_keyset_pages_and_the_counts(self, recorder):
        await append_ok(recorder, unit("acme", org(), music("a"), music("b"), music("c"),
                                       music("failed", error=True), replace(music("inline"), storage="inline")))
        await append_ok(recorder, unit("acme", expired("c")))
        [[later]] = await append_ok(recorder, unit("acme", music("later")))
        before = later.recorded_at_us
        first = await queries.due_media_page(recorder, before, limit=1)
        rest = await queries.due_media_page(recorder, before, (first[0].created_at_us, first[0].request_id))
        assert sorted(t.request_id for t in first + rest) == ["a", "b"]
        assert first[0].object_key == f"acme/{first[0].request_id}.mp3" and first[0].org_id == "acme"
        assert await queries.hosted_due_count(recorder, before) == 2
        assert await queries.hosted_due_count(recorder, before + 1) == 3
        assert await queries.expired_media_count(recorder) == 1

    async def test_text_still_kept_before_an_instant(self, recorder):
        [[_, first]] = await append_ok(recorder, unit("acme", org(), request("r1", content_id="c1"),
                                                      contents=[content("c1", b"x")]))
        assert await queries.due_text_count(recorder, first.recorded_at_us) == 0
        assert await queries.due_text_count(recorder, first.recorded_at_us + 1) == 1
        await recorder.remove_text(first.recorded_at_us + 1, first.recorded_at_us + 1)
        assert await queries.due_text_count(recorder, first.recorded_at_us + 1) == 0

    # -- the request log and music tracks ------------------------------------------------------

    async def test_log_pages_are_newest_first_below_a_position_and_filtered(self, recorder):
        _, r2, _, _ = await three_requests(recorder)
        page = await log_queries.log_page(recorder, "acme", limit=2)
        assert [row.request_id for row in page] == ["r3", "r2"]
        assert [row.request_id for row in await log_queries.log_page(recorder, "acme", before=r2.position)] == ["r1"]
        assert [row.request_id for row in await log_queries.log_page(recorder, "acme", [("status", 200)])] == [
            "r3", "r1"]
        assert [row.request_id for row in await log_queries.log_page(
            recorder, "acme", [("route", "/v1/embeddings"), ("status", 502)])] == ["r2"]
        assert await log_queries.log_page(recorder, "acme", [("model", "other")]) == []
        with pytest.raises(ValueError, match="cannot be filtered by 'org_id'"):
            log_queries.log_page_sql("acme", [("org_id", "beta")], None, 1)

    async def test_a_log_entry_by_position_or_request_id_only_in_its_own_org(self, recorder):
        r1, _, _, r9 = await three_requests(recorder)
        row = await log_queries.log_entry(recorder, "acme", position=r1.position)
        assert row == await log_queries.log_entry(recorder, "acme", request_id="r1")
        assert (row.position, row.charged_inr_nano, row.prompt_tokens, row.content_id, row.status) == (
            r1.position, 5, 3, "c1", 200)
        assert await log_queries.log_entry(recorder, "acme", request_id="r9") is None
        assert await log_queries.log_entry(recorder, "acme", position=r9.position) is None

    async def test_kept_and_removed_text(self, recorder):
        [[_, r1]] = await append_ok(recorder, unit("acme", org(), request("r1", content_id="c1"),
                                                   contents=[content("c1", b"kept")]))
        assert await log_queries.text(recorder, "c1") == log_queries.Text(b"kept", None)
        assert await log_queries.text(recorder, "c2") is None
        await recorder.remove_text(r1.recorded_at_us + 1, 42)
        assert await log_queries.text(recorder, "c1") == log_queries.Text(None, 42)

    async def test_tracks_with_their_charge_and_texts(self, recorder):
        await append_ok(recorder, unit("acme", org()), unit("beta", org("Beta")))
        [[_, logged, _]] = await append_ok(recorder, unit(
            "acme", credits(1), replace(request("m1", charged=7), route="/v1/music"),
            music("m1", prompt_content_id="p1"), contents=[content("p1", b'{"prompt": "hum"}')]))
        await append_ok(recorder, unit("beta", replace(request("m2"), route="/v1/music"), music("m2")))
        row = await log_queries.track(recorder, "m1")
        assert (row.org_id, row.position, row.charged_inr_nano, row.storage, row.error) == (
            "acme", logged.position, 7, "s3", 0)
        assert (row.prompt, row.prompt_removed_at_us, row.text) == (b'{"prompt": "hum"}', None, None)
        assert await log_queries.track_at(recorder, "acme", logged.position) == row
        assert await log_queries.track_at(recorder, "beta", logged.position) is None
        assert await log_queries.org_tracks(recorder, "acme", 10) == [row]
        assert [t.request_id for t in await log_queries.org_tracks(recorder, "beta", 10)] == ["m2"]
        assert await log_queries.track_text_ids(recorder, "m1") == ("p1", "")
        assert await log_queries.track_text_ids(recorder, "r1") is None
        assert await log_queries.track(recorder, "x") is None

    async def test_what_requests_hold_and_what_escrow_slices_hold_apart(self, recorder):
        def held(hold_id: str, amount: int, key_id: str, request_id: str = "") -> CreditsHeld:
            return CreditsHeld(hold_id=hold_id, request_id=request_id, amount_inr_nano=amount, key_id=key_id)

        await append_ok(recorder, unit("acme", org(), key("k1"), key("k2"), credits(1_000)),
                        unit("beta", org("Beta"), key("b1"), credits(100)))
        await append_ok(recorder, unit("acme", held("hold_r1", 30, "k1", "r1"), held("slice_k1", 100, "k1"),
                                       held("slice_org", 50, ""), held("hold_r2", 7, "k2", "r2")),
                        unit("beta", held("slice_b1", 40, "b1")))
        await append_ok(recorder, unit("acme", replace(request("r3", charged=20), draws=(
            Draw(hold_id="slice_k1", amount_inr_nano=20, key_id="k1"),))))

        async def spend(org_id: str) -> list[tuple]:
            rows = await queries.key_spend(recorder, org_id, 0)
            return sorted((row.key_id, row.held_inr_nano, row.escrow_inr_nano) for row in rows)

        assert await spend("acme") == [("k1", 30, 80), ("k2", 7, 0)]
        assert await spend("beta") == [("b1", 0, 40)]
        assert (await queries.org_escrow(recorder, "acme"), await queries.org_escrow(recorder, "beta")) == (130, 40)
        await append_ok(recorder, unit("acme", HoldReleased(hold_id="slice_k1", amount_inr_nano=80, key_id="k1"),
                                       HoldReleased(hold_id="hold_r1", amount_inr_nano=30, key_id="k1")))
        assert await spend("acme") == [("k1", 0, 0), ("k2", 7, 0)]
        assert await queries.org_escrow(recorder, "acme") == 50
        assert (await queries.org(recorder, "acme")).held_inr_nano == 57  # the slice of 50 and r2's 7

    async def test_a_statement_the_database_refuses_is_the_ledgers_own_error(self, recorder):
        with pytest.raises(DatabaseError):
            await recorder._fetch("SELECT no_such_column FROM orgs")

