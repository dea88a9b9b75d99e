"""PostgreSQL appends: a batch costs a few round trips whatever its size, and its set-based writes
leave exactly the tables that appending its units one at a time leaves.

Round trips are counted on the wire, by a proxy between the recorder and the server (pg_wire).
"""

import msgspec

from ledger import projections
from ledger.events import CreditsHeld, Draw, HoldReleased
from ledger.backends.postgres import PostgresRecorder
from ledger.recorder import Append
from tests.ledger.ledger_helpers import (
    append_ok, claim, content, credits, expired, key, music, org, request, retention, revoke, unclaim, unit,
)
from tests.ledger.pg_wire import counting_round_trips
from tests.support import POSTGRES_DSN, postgres_schema, postgres_url

ORGS = [f"org{n}" for n in range(5)]


def setup_units() -> list[Append]:
    return [unit(name, org(name), credits(10**15), key(f"k-{name}"), expected_version=0) for name in ORGS]


def request_units(count: int, tag: str, *, holding: bool = False) -> list[Append]:
    """`count` requests across the orgs, each with its text; holding: each also holds and releases."""
    units = []
    for n in range(count):
        name, body = ORGS[n % len(ORGS)], f"text {tag} {n}".encode()
        events = [request(f"req-{tag}-{n}", charged=1000 + n, key_id=f"k-{name}", content_id=f"c-{tag}-{n}")]
        if holding:
            events = [CreditsHeld(hold_id=f"h-{tag}-{n}", request_id=f"req-{tag}-{n}", amount_inr_nano=5000),
                      *events, HoldReleased(hold_id=f"h-{tag}-{n}", amount_inr_nano=5000)]
        units.append(Append(name, events, contents=[content(f"c-{tag}-{n}", body)]))
    return units


async def round_trips_of(recorder: PostgresRecorder, counter, units: list[Append]) -> int:
    before = counter.round_trips
    await append_ok(recorder, *units)
    return counter.round_trips - before


async def test_an_append_costs_the_same_few_round_trips_for_one_unit_or_hundreds():
    async with postgres_schema("trips") as schema, counting_round_trips() as counter:
        recorder = PostgresRecorder(postgres_url(counter.port), schema)
        await recorder.open()
        try:
            await append_ok(recorder, *setup_units())
            for tag in ("warm", "warm-hold"):  # the first batch of a shape learns its statements once
                await append_ok(recorder, *request_units(300, tag, holding=tag.endswith("hold")))
            one = await round_trips_of(recorder, counter, request_units(1, "one"))
            many = await round_trips_of(recorder, counter, request_units(500, "many"))
            holding = await round_trips_of(recorder, counter, request_units(500, "holding", holding=True))
            await append_ok(recorder, *[Append(name, [CreditsHeld(hold_id=f"slice-{name}", request_id="",
                                                                  amount_inr_nano=10**12)]) for name in ORGS])
            await append_ok(recorder, *drawing_units(300, "warm-draw"))
            drawing = await round_trips_of(recorder, counter, drawing_units(500, "drawing"))
        finally:
            await recorder.close()
    # BEGIN with the lock, the reads under it, the writes, COMMIT; a hold and its release per
    # request add two writes (the orgs and holds tables are each changed by more than one kind of
    # statement, which cannot share one); a charge drawn from a slice held ahead adds none
    assert (one, many, holding, drawing) == (4, 4, 6, 4)


def drawing_units(count: int, tag: str) -> list[Append]:
    """`count` requests across the orgs, each drawing its charge from its org's slice."""
    return [Append(ORGS[n % len(ORGS)], [msgspec.structs.replace(
        request(f"req-{tag}-{n}", charged=1000 + n, key_id=f"k-{ORGS[n % len(ORGS)]}"),
        draws=(Draw(hold_id=f"slice-{ORGS[n % len(ORGS)]}", amount_inr_nano=1000 + n),))]) for n in range(count)]


def mixed_units() -> list[Append]:
    """A batch touching every projection, with rows changed several times within it."""
    acme = [claim("idem-1", "m1"), music("m1", idempotency_key="idem-1", request_hash="h"), retention("none"),
            retention("retain"), key("k-2"), revoke("k-2"), unclaim("idem-0", "m0")]
    return [unit("acme", org("Acme"), credits(10**12), key("k1"), claim("idem-0", "m0"), music("m0")),
            *request_units(40, "mixed", holding=True),
            unit("acme", *acme), unit("acme", expired("m0"), credits(7)), *request_units(40, "later")]


async def tables(recorder: PostgresRecorder) -> dict[str, list[tuple]]:
    return {table: await recorder._fetch(projections.select_all(table)) for table in projections.TABLES}


async def test_a_batch_written_as_sets_leaves_the_tables_of_its_units_appended_one_by_one():
    async with postgres_schema("sets") as together_schema, postgres_schema("rows") as alone_schema:
        together = PostgresRecorder(POSTGRES_DSN, together_schema)
        alone = PostgresRecorder(POSTGRES_DSN, alone_schema)
        for recorder in (together, alone):
            await recorder.open()
            await append_ok(recorder, *setup_units())
        try:
            units = mixed_units()
            await append_ok(together, *units)
            for one in units:
                await append_ok(alone, one)
            assert_same_apart_from_instants(await tables(together), await tables(alone))
        finally:
            await together.close()
            await alone.close()


def assert_same_apart_from_instants(together: dict, alone: dict) -> None:
    """Each unit appended alone is recorded at its own instant and position: compare the rows
    with those replaced by their order (positions and instants aside, they must be equal)."""
    for table in together:
        assert len(together[table]) == len(alone[table]), table
        assert [_plain(row) for row in together[table]] == [_plain(row) for row in alone[table]], table


def _plain(row: tuple) -> tuple:
    # Big integers are instants (µs since 1970) or positions; amounts here stay below 10**15.
    return tuple("instant" if isinstance(v, int) and v > 10**15 else v for v in row)
