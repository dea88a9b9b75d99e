"""Holds, draws, releases, renewals and expiries in any order (issue 24), against a model.

Hypothesis draws sequences of units on one org: holds (new, or adding to one held), draws of a
charge from a hold, releases of part or all of one, renewals, expiries (whenever they are tried,
lapsed or not) and the clock moving on. The ledger must accept exactly what the model says a hold
still covers, keep `holds`, `orgs.held_inr_nano` and `orgs.spent_inr_nano` equal to the model,
never let a hold end twice or go below zero, and rebuild the same tables on replay.
"""

import asyncio
import os
import tempfile
from pathlib import Path

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger import audit, leases
from ledger.events import CreditsHeld, Draw, HoldReleased, HoldsRenewed
from ledger.recorder import Append, HoldNotHeld
from ledger.backends.sqlite import SQLiteRecorder
from tests.ledger.ledger_helpers import append_ok, credits, key, org, request

SECOND = 1_000_000
HOLD_IDS = ("h0", "h1", "h2")
amounts = st.integers(min_value=1, max_value=500)
operations = st.lists(st.one_of(
    st.tuples(st.just("hold"), st.sampled_from(HOLD_IDS), amounts, st.integers(1, 5)),
    st.tuples(st.just("draw"), st.sampled_from(HOLD_IDS), amounts, amounts),
    st.tuples(st.just("release"), st.sampled_from(HOLD_IDS), amounts),
    st.tuples(st.just("renew"), st.sampled_from(HOLD_IDS), st.integers(1, 5)),
    st.tuples(st.just("expire"), st.sampled_from(HOLD_IDS)),
    st.tuples(st.just("wait"), st.integers(1, 4)),
), max_size=25)


class Model:
    """What each hold still holds and when it lapses, and what was spent."""

    def __init__(self) -> None:
        self.holds: dict[str, tuple[int, int]] = {}
        self.spent = 0

    def accepts(self, operation: tuple, now: int) -> bool:
        match operation:
            case ("hold", hold_id, amount, lease):  # the latest hold or renewal sets the lapse
                have, _ = self.holds.get(hold_id, (0, 0))
                self.holds[hold_id] = (have + amount, now + lease * SECOND)
            case ("draw", hold_id, amount, charged):  # a draw must leave some of its hold
                have, _ = self.holds.get(hold_id, (0, 0))
                return amount < have and self._take(hold_id, amount) and self._spend(max(charged, amount))
            case ("release", hold_id, amount):
                return self._take(hold_id, amount)
            case ("renew", hold_id, lease):
                if hold_id in self.holds:
                    self.holds[hold_id] = (self.holds[hold_id][0], now + lease * SECOND)
            case ("expire", hold_id):
                have, lapses = self.holds.get(hold_id, (0, 0))
                return hold_id in self.holds and lapses <= now and self._take(hold_id, have)
        return True

    def _take(self, hold_id: str, amount: int) -> bool:
        """Take `amount` from a hold; one left with nothing is no longer held."""
        have, lapses = self.holds.get(hold_id, (0, 0))
        if hold_id not in self.holds or amount > have:
            return False
        if amount == have:
            del self.holds[hold_id]
        else:
            self.holds[hold_id] = (have - amount, lapses)
        return True

    def _spend(self, charged: int) -> bool:
        self.spent += charged
        return True


def unit_of(operation: tuple, n: int) -> Append:
    match operation:
        case ("hold", hold_id, amount, lease):
            event = CreditsHeld(hold_id=hold_id, request_id="", amount_inr_nano=amount, lease_us=lease * SECOND)
        case ("draw", hold_id, amount, charged):
            event = msgspec.structs.replace(request(f"r{n}", charged=max(charged, amount)),
                                            draws=(Draw(hold_id=hold_id, amount_inr_nano=amount),))
        case ("release", hold_id, amount):
            event = HoldReleased(hold_id=hold_id, amount_inr_nano=amount)
        case ("renew", hold_id, lease):
            event = HoldsRenewed(hold_ids=(hold_id,), lease_us=lease * SECOND)
    return Append("acme", [event])


async def run(path: Path, sequence: list[tuple]) -> None:
    now = [1_000 * SECOND]
    recorder = SQLiteRecorder(str(path), clock=lambda: now[0])
    await recorder.open()
    try:
        await append_ok(recorder, Append("acme", [org(), key("k1"), credits(10**9)]))
        model = await apply(recorder, sequence, now)
        rows = await recorder._fetch("SELECT hold_id, amount_inr_nano, lapses_at_us FROM holds ORDER BY hold_id")
        assert rows == sorted((h, a, lapse) for h, (a, lapse) in model.holds.items())
        assert await recorder._fetch("SELECT held_inr_nano, spent_inr_nano FROM orgs") == [
            (sum(a for a, _ in model.holds.values()), model.spent)]
        assert (await audit.verify(recorder))[1] == []
        await audit.replay(recorder)
        assert (await audit.verify(recorder))[1] == []
    finally:
        await recorder.close()


async def apply(recorder: SQLiteRecorder, sequence: list[tuple], now: list[int]) -> Model:
    model = Model()
    for n, operation in enumerate(sequence):
        if operation[0] == "wait":
            now[0] += operation[1] * SECOND
            continue
        expected = model.accepts(operation, now[0])
        if operation[0] == "expire":
            lapsed = {hold.hold_id: hold for hold in await leases.lapsed(recorder, now[0])}
            outcome = (await recorder.append([lapsed[operation[1]].expiry()]))[0] if operation[1] in lapsed \
                else HoldNotHeld("not lapsed")
        else:
            [outcome] = await recorder.append([unit_of(operation, n)])
        assert isinstance(outcome, HoldNotHeld) != expected, (operation, outcome)
    return model


@settings(max_examples=int(os.environ.get("HOLD_EXAMPLES", "60")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(operations)
def test_holds_end_at_most_once_and_never_below_zero_whatever_the_order(sequence):
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(run(Path(tmp) / "ledger.db", sequence))
