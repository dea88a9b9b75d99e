"""verify and replay against tampering done with SQL, on SQLite.

`populate` writes 11 events: acme at positions 1-4 (org, key k1, key k2, credits "hello"),
beta at 5-6, acme v5 at 7 (request r1), beta at 8, acme v6-v7 at 9-10, beta at 11.
"""

import pytest

from ledger import audit
from ledger.events import decode_event
from tests.ledger.ledger_helpers import HELLO_POSITION, POPULATED, credits, populate, projection_tables

P = HELLO_POSITION  # acme v4; the next acme event is v5 at position 7
DROP_TRIGGERS = ("DROP TRIGGER events_are_immutable", "DROP TRIGGER events_are_permanent")


@pytest.fixture
async def ledger(sqlite_recorder):
    await populate(sqlite_recorder)
    return sqlite_recorder


@pytest.fixture
async def unguarded(ledger, tamper):
    """The populated ledger with the triggers that protect events removed."""
    await tamper(*DROP_TRIGGERS)
    return ledger


async def event_at(recorder, position):
    [recorded] = await recorder.read(after=position - 1, limit=1)
    assert recorded.position == position
    return recorded


async def test_verify_of_an_empty_ledger_checks_nothing(sqlite_recorder):
    assert await audit.verify(sqlite_recorder) == (0, [])


async def test_verify_passes_on_a_healthy_ledger(ledger):
    assert await audit.verify(ledger) == (POPULATED, [])


async def test_events_refuse_update(ledger, tamper):
    with pytest.raises(Exception, match="ledger events are immutable"):
        await tamper(("UPDATE events SET recorded_at_us = 0 WHERE position = ?", [P]))
    assert (await event_at(ledger, P)).recorded_at_us > 0


async def test_events_refuse_delete(ledger, tamper):
    with pytest.raises(Exception, match="ledger events cannot be deleted"):
        await tamper(("DELETE FROM events WHERE position = ?", [P]))
    assert [r.position for r in await ledger.read()] == list(range(1, POPULATED + 1))


async def test_verify_catches_one_changed_byte_inside_the_data(unguarded, tamper):
    original = (await event_at(unguarded, P)).data
    data = original.replace(b'"hello"', b'"hellp"')
    assert len(data) == len(original) and sum(a != b for a, b in zip(original, data, strict=True)) == 1
    assert decode_event(data) == credits(1_000_000_000, "hellp")
    await tamper(("UPDATE events SET data = ? WHERE position = ?", [data, P]))
    assert await audit.verify(unguarded) == (POPULATED, [f"position {P} (stream acme v4): hash mismatch"])


async def test_verify_catches_a_changed_hash_and_the_link_after_it(unguarded, tamper):
    digest = bytearray((await event_at(unguarded, P)).hash)
    digest[0] ^= 1
    await tamper(("UPDATE events SET hash = ? WHERE position = ?", [bytes(digest), P]))
    assert await audit.verify(unguarded) == (POPULATED, [
        f"position {P} (stream acme v4): hash mismatch",
        "position 7 (stream acme v5): hash mismatch"])


async def test_verify_catches_a_changed_recorded_at(unguarded, tamper):
    await tamper(("UPDATE events SET recorded_at_us = recorded_at_us + 1 WHERE position = ?", [P]))
    assert await audit.verify(unguarded) == (POPULATED, [f"position {P} (stream acme v4): hash mismatch"])


async def test_verify_catches_a_changed_stream_id(unguarded, tamper):
    await tamper(("UPDATE events SET stream_id = 'acmf' WHERE position = ?", [P]))
    assert await audit.verify(unguarded) == (POPULATED, [
        "stream acmf: version 4 follows 0",
        f"position {P} (stream acmf v4): hash mismatch",
        "stream acme: version 5 follows 3",
        "position 7 (stream acme v5): hash mismatch"])


async def test_verify_catches_a_changed_type(unguarded, tamper):
    await tamper(("UPDATE events SET type = 'credits_addee' WHERE position = ?", [P]))
    assert await audit.verify(unguarded) == (POPULATED, [
        f"position {P}: stored type 'credits_addee' does not match its data",
        f"position {P} (stream acme v4): hash mismatch"])


async def test_verify_catches_a_renumbered_position(unguarded, tamper):
    await tamper(("UPDATE events SET position = 100 WHERE position = ?", [P]))
    assert await audit.verify(unguarded) == (POPULATED, [
        f"position 5 follows {P - 1}: the log has a gap",
        "stream acme: version 5 follows 3",
        "position 7 (stream acme v5): hash mismatch",
        f"position 100 follows {POPULATED}: the log has a gap",
        "stream acme: version 4 follows 7",
        "position 100 (stream acme v4): hash mismatch"])


async def test_verify_catches_a_deleted_event(unguarded, tamper):
    await tamper(("DELETE FROM events WHERE position = ?", [P]))
    checked, problems = await audit.verify(unguarded)
    assert checked == POPULATED - 1  # the events that are there, not the last position
    assert problems == [
        f"position 5 follows {P - 1}: the log has a gap",
        "stream acme: version 5 follows 3",
        "position 7 (stream acme v5): hash mismatch"]


async def test_verify_reports_an_undecodable_event_instead_of_crashing(unguarded, tamper):
    await tamper(("UPDATE events SET data = ? WHERE position = ?", [b'{"type":"credits_added",', P]))
    checked, [problem] = await audit.verify(unguarded)
    assert checked == 0
    assert problem.startswith(f"event at position {P} does not decode: ")


async def test_verify_reports_an_event_of_an_unknown_type(unguarded, tamper):
    await tamper(("UPDATE events SET data = ? WHERE position = ?", [b'{"type":"gift","amount":1}', P]))
    _checked, [problem] = await audit.verify(unguarded)
    assert problem.startswith(f"event at position {P} does not decode: ")


async def test_verify_reports_data_rewritten_as_text_by_sql(unguarded, tamper):
    # replace() returns TEXT, so the most obvious SQL tamper also changes the column's type
    await tamper(("UPDATE events SET data = replace(data, 'hello', 'hellp') WHERE position = ?", [P]))
    _checked, [problem] = await audit.verify(unguarded)
    assert problem == (f"event at position {P} has a column of the wrong type:"
                       " ('int', 'str', 'int', 'int', 'str', 'str', 'bytes')")


async def test_verify_reports_a_changed_balance_as_a_projection_difference(ledger, tamper):
    before = await projection_tables(ledger)
    await tamper("UPDATE orgs SET credits_inr_nano = credits_inr_nano + 1 WHERE org_id = 'acme'")
    stored = (await projection_tables(ledger))["orgs"][0]
    assert stored[4] == before["orgs"][0][4] + 1
    assert await audit.verify(ledger) == (POPULATED, [
        f"orgs: row 0 differs: stored {stored!r} != replayed {before['orgs'][0]!r}"])


async def test_verify_reports_a_missing_request_log_row(ledger, tamper):
    await tamper("DELETE FROM request_log WHERE request_id = 'r2'")
    assert await audit.verify(ledger) == (POPULATED, ["request_log: 1 stored rows != 2 replayed rows"])


async def test_verify_reports_an_unrevoked_key(ledger, tamper):
    before = await projection_tables(ledger)
    await tamper("UPDATE api_keys SET revoked_at_us = NULL WHERE key_id = 'k1'")
    stored = (await projection_tables(ledger))["api_keys"][0]
    assert await audit.verify(ledger) == (POPULATED, [
        f"api_keys: row 0 differs: stored {stored!r} != replayed {before['api_keys'][0]!r}"])


async def test_replay_fixes_a_projection_tamper_and_verify_then_passes(ledger, tamper):
    before = await projection_tables(ledger)
    await tamper("UPDATE orgs SET credits_inr_nano = 0, requests = 7",
                 "DELETE FROM api_keys WHERE key_id = 'k2'",
                 "INSERT INTO request_log SELECT 'forged', org_id, position, key_id, created_at_us, route,"
                 " model, provider, status, stream, prompt_tokens, completion_tokens, cost_usd_nano,"
                 " cost_inr_nano, charged_inr_nano, usd_to_inr, latency_ms, error, content_id, anomaly,"
                 " price_version, price_tier, batch_id, custom_id"
                 " FROM request_log WHERE request_id = 'r1'")
    assert await projection_tables(ledger) != before
    assert await audit.replay(ledger) == POPULATED
    assert await projection_tables(ledger) == before
    assert await audit.verify(ledger) == (POPULATED, [])


async def test_replay_reports_progress_up_to_the_last_position(ledger):
    calls = []
    assert await audit.replay(ledger, progress=lambda done, total: calls.append((done, total))) == POPULATED
    assert calls == [(POPULATED, POPULATED)]


async def test_batches_reads_in_position_order_in_batches_of_the_given_size(ledger):
    sizes = [[r.position for r in batch] async for batch in audit.batches(ledger, size=4)]
    assert sizes == [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11]]
    upto = [[r.position for r in batch] async for batch in audit.batches(ledger, size=4, upto=6)]
    assert upto == [[1, 2, 3, 4], [5, 6]]
