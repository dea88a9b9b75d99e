"""A replay folds a batch's statements per row, and carries balances, counters and rollups from
batch to batch (ledger.batches.Folder): whatever the events, the batch size and how often the
carried rows are written, the rebuilt tables equal the ones the appends wrote one unit at a time
(money rule: property-based, over every event that changes a balance, a hold or a rollup)."""

import asyncio
import tempfile
from pathlib import Path

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger import audit, batches
from ledger.backends.sqlite import SQLiteRecorder
from ledger.events import Draw, HoldsRenewed
from tests.ledger.ledger_helpers import credits, hold, key, org, projection_tables, release, request, revoke, unit

DAY = 86_400_000_000
ORGS, KEYS = ("a", "b", "c"), ("k1", "k2")
steps = st.lists(st.one_of(
    st.tuples(st.just("credits"), st.sampled_from(ORGS), st.integers(1, 10**6)),
    st.tuples(st.just("request"), st.sampled_from(ORGS), st.sampled_from(KEYS), st.integers(0, 999),
              st.integers(0, 50), st.sampled_from(["m1", "m2"]), st.sampled_from([200, 502])),
    st.tuples(st.just("hold"), st.sampled_from(ORGS), st.integers(2, 900)),
    st.tuples(st.just("renew"), st.sampled_from(ORGS)),
    st.tuples(st.just("revoke"), st.sampled_from(ORGS), st.sampled_from(KEYS)),
    st.tuples(st.just("day"), st.integers(1, 3)),
), max_size=40)


def units_of(step: tuple, n: int, holds: dict[str, list[tuple[str, int]]]) -> list:
    match step:
        case ("credits", name, amount):
            return [unit(name, credits(amount))]
        case ("request", name, key_id, charged, tokens, model, status):
            event = msgspec.structs.replace(request(f"r{n}", charged=charged, key_id=f"{name}-{key_id}",
                                                    prompt_tokens=tokens, status=status), model=model)
            if holds[name] and charged:  # drawn from the oldest hold still held, the rest released
                hold_id, amount = holds[name].pop(0)
                drawn = min(charged, amount - 1)
                event = msgspec.structs.replace(event, draws=(Draw(hold_id=hold_id, amount_inr_nano=drawn),))
                return [unit(name, event, release(hold_id, amount - drawn))]
            return [unit(name, event)]
        case ("hold", name, amount):
            holds[name].append((f"h{n}", amount))
            return [unit(name, hold(f"h{n}", amount))]
        case ("renew", name):
            return [unit(name, HoldsRenewed(hold_ids=tuple(h for h, _ in holds[name]), lease_us=10**7))]
        case ("revoke", name, key_id):
            return [unit(name, revoke(f"{name}-{key_id}"))]
    return []


async def run(path: Path, sequence: list[tuple], size: int, carried: int) -> None:
    now = [1_700_000_000_000_000]
    recorder = SQLiteRecorder(str(path), clock=lambda: now[0])
    await recorder.open()
    try:
        for name in ORGS:
            await recorder.append([unit(name, org(name), *(key(f"{name}-{k}") for k in KEYS), credits(10**9))])
        holds: dict[str, list[tuple[str, int]]] = {name: [] for name in ORGS}
        for n, step in enumerate(sequence):
            if step[0] == "day":
                now[0] += step[1] * DAY
            for appended in units_of(step, n, holds):
                [outcome] = await recorder.append([appended])
                assert not isinstance(outcome, Exception), (step, outcome)
        live = await projection_tables(recorder)
        scratch = recorder.scratch()
        await scratch.open()
        try:
            batches.DEFERRED_ROWS = carried
            await scratch.rebuild(audit.batches(recorder, size=size))
            assert await projection_tables(scratch) == live
        finally:
            await scratch.close()
    finally:
        await recorder.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps, st.integers(1, 12), st.integers(1, 8))
def test_a_replay_in_any_batches_writing_carried_rows_at_any_point_rebuilds_the_appended_tables(
        sequence, size, carried):
    rows = batches.DEFERRED_ROWS
    try:
        with tempfile.TemporaryDirectory() as tmp:
            asyncio.run(run(Path(tmp) / "ledger.db", sequence, size, carried))
    finally:
        batches.DEFERRED_ROWS = rows
