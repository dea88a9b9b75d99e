"""After a charge commits, billing tells the app's observers in order (gateway.billing.observers);
one that fails is logged and the next is still told."""

import msgspec

from gateway.billing.observers import tell
from gateway.ops.facts import ChargeFacts, CostHeaders, RequestFacts
from ledger.events import RequestCompleted

EVENT = RequestCompleted(request_id="req_1", key_id="key_1", route="/v1/chat/completions", model="m", provider="p",
                         status=200, cost_usd_nano=1_000_000_000, cost_inr_nano=85_000_000_000,
                         charged_inr_nano=85_000_000_000, usd_to_inr="85")


class Heard:
    def __init__(self, heard: list[str], name: str, *, fails: bool = False) -> None:
        self._heard, self._name, self._fails = heard, name, fails

    async def charged(self, facts: RequestFacts, event: RequestCompleted) -> None:
        self._heard.append(self._name)
        if self._fails:
            raise RuntimeError("an observer's own bug")


async def told(observers: tuple, event: RequestCompleted = EVENT) -> RequestFacts:
    facts = RequestFacts()
    await tell(observers, facts, event)
    return facts


async def test_observers_are_told_in_order_and_a_failing_one_does_not_stop_the_next():
    heard: list[str] = []
    await told((Heard(heard, "first"), Heard(heard, "second", fails=True), Heard(heard, "third")))
    assert heard == ["first", "second", "third"]


async def test_the_facts_observers_write_the_charge_and_a_delivered_answers_cost_headers():
    facts = await told((ChargeFacts(), CostHeaders()))
    assert (facts.model, facts.provider, facts.cost_inr) == ("m", "p", "85")
    assert facts.cost_headers == {"X-Gateway-Cost-INR": "85", "X-Gateway-Cost-USD": "1",
                                  "X-Gateway-USD-INR-Rate": "85", "X-Gateway-Charged-INR": "85"}
    left = await told((ChargeFacts(), CostHeaders()), msgspec.structs.replace(EVENT, status=499))
    assert left.cost_headers is None and left.cost_inr == "85"
