"""Billing is exact: the balance falls by exactly the sum of what responses report."""

import asyncio
from decimal import Decimal

import msgspec
import pytest

from gateway.billing.pricing import Usage, token_cost
from ledger import audit
from ledger.events import CreditsHeld, HoldReleased, HoldsRenewed, RequestCompleted
from tests.support import auth, chat_body, decimal_json, sse_lines


async def _chat(gateway, key: str, text: str) -> Decimal:
    response = await gateway.client.post("/v1/chat/completions", json=chat_body(text, max_tokens=20), headers=auth(key))
    assert response.status == 200
    return decimal_json(await response.read())["usage"]["cost_inr"]


async def _stream(gateway, key: str, text: str) -> Decimal:
    body = chat_body(text, stream=True, stream_options={"include_usage": True}, max_tokens=20)
    response = await gateway.client.post("/v1/chat/completions", json=body, headers=auth(key))
    events = await sse_lines(response)
    return decimal_json(events[-2])["usage"]["cost_inr"]


async def test_balance_equals_credits_minus_sum_of_reported_costs_under_concurrency(gateway):
    org = await gateway.new_org("12.345678901")
    texts = [f"request number {i} " + "word " * (i % 7) + f"[sim:tokens={1 + i % 13}]" for i in range(120)]
    costs = await asyncio.gather(*[
        (_stream if i % 3 == 0 else _chat)(gateway, org["api_key"], text) for i, text in enumerate(texts)])
    assert await gateway.balance(org["org_id"]) == Decimal("12.345678901") - sum(costs)
    charges = [r.event for r in await gateway.events() if isinstance(r.event, RequestCompleted)]
    assert len(charges) == 120 and len({c.request_id for c in charges}) == 120
    assert sum(Decimal(c.charged_inr_nano) for c in charges) / 10**9 == sum(costs)
    assert gateway.ledger.writer.largest_batch > 1  # concurrent charges shared commits
    checked, problems = await audit.verify(gateway.ledger.recorder)
    # the catalogue put in force at start-up, org created, key created, credits, each of 120 charges,
    # and the holds: the requests' own (those that came before an escrow slice) and the slices'
    holding = [r for r in await gateway.events() if isinstance(r.event, CreditsHeld | HoldReleased | HoldsRenewed)]
    assert problems == [] and checked == 1 + 3 + 120 + len(holding)


async def test_every_charge_records_the_rate_used(make_gateway, config):
    billing = msgspec.structs.replace(config.billing, usd_to_inr=Decimal("83.3333"))
    gateway = await make_gateway(msgspec.structs.replace(config, billing=billing))
    org = await gateway.new_org("5")
    cost = await _chat(gateway, org["api_key"], "one two")
    (charge,) = [r.event for r in await gateway.events() if isinstance(r.event, RequestCompleted)]
    assert charge.usd_to_inr == "83.3333"
    exact_inr = Decimal(charge.cost_usd_nano) / 10**9 * Decimal("83.3333")  # 0.00087499965
    assert Decimal(charge.cost_inr_nano) / 10**9 == cost == exact_inr.quantize(Decimal("1e-9"))


@pytest.mark.parametrize(("prompt", "completion"), [(0, 0), (1, 0), (7, 16), (123_456, 7_890)])
def test_token_cost_is_exact_decimal_arithmetic(prompt, completion):
    cost = token_cost(Usage(prompt, completion), Decimal("0.00000015"), Decimal("0.0000006"), Decimal("84"))
    usd = prompt * Decimal("0.00000015") + completion * Decimal("0.0000006")
    assert Decimal(cost.usd_total_nano) / 10**9 == usd
    assert Decimal(cost.inr_nano) / 10**9 == usd * 84


def test_cached_prompt_tokens_cost_their_cache_prices_and_the_rest_the_prompt_price():
    usage = Usage(prompt_tokens=100, completion_tokens=10, cached_prompt_tokens=60, cache_write_tokens=30)
    prompt, completion, read, write = (Decimal(p) for p in ("0.000001", "0.000005", "0.0000001", "0.00000125"))
    cost = token_cost(usage, prompt, completion, Decimal("84"), read, write)
    usd_in = 10 * prompt + 60 * read + 30 * write
    assert Decimal(cost.usd_input_nano) / 10**9 == usd_in
    assert Decimal(cost.inr_nano) / 10**9 == (usd_in + 10 * completion) * 84
    plain = token_cost(usage, prompt, completion, Decimal("84"))  # no cache prices: all at the prompt price
    assert Decimal(plain.usd_input_nano) / 10**9 == 100 * prompt


def test_token_cost_rounds_to_the_nano_half_even():
    cost = token_cost(Usage(1, 0), Decimal("0.0000000005"), Decimal(0), Decimal(1))
    assert cost.usd_input_nano == 0  # 0.5 nano rounds to even
    cost = token_cost(Usage(3, 0), Decimal("0.0000000005"), Decimal(0), Decimal(1))
    assert cost.usd_input_nano == 2  # 1.5 nano rounds to even


async def test_charges_seen_by_a_second_process_view(gateway, org):
    """A directory loaded from the projection (as a fresh process would) has the same balance."""
    from gateway.accounts.directory import Directory
    await _chat(gateway, org["api_key"], "a")
    fresh = Directory()
    await fresh.load(gateway.ledger.recorder)
    live = gateway.ledger.directory.account(org["org_id"])
    assert fresh.account(org["org_id"]).balance_inr_nano == live.balance_inr_nano
    assert Decimal(live.balance_inr_nano) / 10**9 == await gateway.balance(org["org_id"])
