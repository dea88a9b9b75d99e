"""GET /v1/statements/YYYY-MM through the real gateway, after real chat requests to the simulator:
JSON and CSV agree with each other and with the ledger, any key of the org may read them, another
org's requests never appear, and a malformed month is a 400 naming it."""

import csv
import io
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from gateway.accounts import admin
from ledger.money import from_nano
from tests.support import auth, chat_body, decimal_json, post_chat


@pytest.fixture(params=["sqlite", "postgresql"])
async def gateway(request, make_gateway, make_pg_gateway, config):
    """Every test here runs on the embedded SQLite ledger and on PostgreSQL."""
    return await (make_gateway if request.param == "sqlite" else make_pg_gateway)(config)


async def statement(gateway, key: str, month: str, status: int = 200, **params: str) -> dict:
    response = await gateway.client.get(f"/v1/statements/{month}", params=params, headers=auth(key))
    assert response.status == status, await response.text()
    assert response.content_type == "application/json"
    return decimal_json(await response.read())


async def charges_csv(gateway, key: str, month: str, **how: str) -> list[dict]:
    headers = {**auth(key), "Accept": "text/csv"} if how.get("accept") else auth(key)
    params = {} if how.get("accept") else {"format": "csv"}
    response = await gateway.client.get(f"/v1/statements/{month}", params=params, headers=headers)
    assert response.status == 200 and response.content_type == "text/csv", await response.text()
    assert response.headers["Cache-Control"] == "no-store"
    return list(csv.DictReader(io.StringIO(await response.text())))


async def charged(gateway, org: dict, key: str, text: str, **extra) -> Decimal:
    response = await post_chat(gateway, {**org, "api_key": key}, chat_body(text, **extra))
    body = decimal_json(await response.read())
    return body["usage"]["cost_inr"] if response.status == 200 else Decimal(0)


def money(body: dict, *names: str) -> tuple[Decimal, ...]:
    """Amounts, each a decimal string in the body (never a JSON number, never a float)."""
    assert all(isinstance(body[name], str) for name in names)
    return tuple(Decimal(body[name]) for name in names)


def this_month() -> str:
    return datetime.now(UTC).strftime("%Y-%m")


async def test_a_statement_after_real_requests_sums_to_the_ledger_and_its_csv(gateway, org):
    plain = await admin.create_key(gateway.ledger.recorder, org["org_id"], name="plain")
    await gateway.ledger.follower.catch_up()
    costs = [await charged(gateway, org, org["api_key"], "one [sim:tokens=5]"),
             await charged(gateway, org, plain["api_key"], "two [sim:tokens=7]"),
             await charged(gateway, org, plain["api_key"], "three", model="claude-haiku-4-5", max_tokens=20),
             await charged(gateway, org, org["api_key"], "boom [sim:status=500]")]
    other = await gateway.new_org("50")
    await charged(gateway, other, other["api_key"], "not yours [sim:tokens=3]")
    month = this_month()
    body = await statement(gateway, plain["api_key"], month)  # any key of the org, not only admin ones
    spent = sum(costs)
    assert (body["org_id"], body["month"], body["requests"]) == (org["org_id"], month, 4)
    assert money(body, "opening_balance_inr", "credits_inr", "charges_inr") == (0, 100, spent)
    [(held,)] = await gateway.ledger.recorder._fetch("SELECT held_inr_nano FROM orgs WHERE org_id = ?",
                                                     (org["org_id"],))
    # This month: what holds hold now, the escrow slices apart from requests' own holds (none running).
    assert money(body, "held_inr", "escrow_inr") == (0, from_nano(held))
    assert money(body, "closing_balance_inr") == (100 - spent,) == (await gateway.balance(org["org_id"]),)
    assert [Decimal(rate) for rate in body["usd_to_inr_rates"]] == [Decimal("84.0")]
    assert {k["key_id"]: k["requests"] for k in body["by_key"]} == {org["key_id"]: 2, plain["key_id"]: 2}
    assert {m["model"]: money(m, "charged_inr") for m in body["by_model"]} == {
        "gpt-4o-mini": (costs[0] + costs[1],), "claude-haiku-4-5": (costs[2],)}
    assert [(d["day"], d["requests"], *money(d, "charged_inr")) for d in body["by_day"]] == [
        (datetime.now(UTC).date().isoformat(), 4, spent)]
    for rows in (await charges_csv(gateway, org["api_key"], month),
                 await charges_csv(gateway, org["api_key"], month, accept="yes")):
        assert list(rows[0]) == ["day", "key_id", "model", "requests", "charged_inr"]
        assert sum(Decimal(row["charged_inr"]) for row in rows) == spent
        assert sum(int(row["requests"]) for row in rows) == 4 and len(rows) == 3
        assert [(r["day"], r["key_id"], r["model"]) for r in rows] == sorted((r["day"], r["key_id"], r["model"])
                                                                             for r in rows)
        assert other["org_id"] not in str(rows) and all(r["key_id"] != other["key_id"] for r in rows)


async def test_another_month_and_another_org_show_nothing_of_these_requests(gateway, org):
    await charged(gateway, org, org["api_key"], "hello [sim:tokens=5]")
    other = await gateway.new_org("7")
    theirs = await statement(gateway, other["api_key"], this_month())
    assert (theirs["org_id"], theirs["requests"], *money(theirs, "charges_inr")) == (other["org_id"], 0, 0)
    assert money(theirs, "closing_balance_inr") == (7,) and theirs["by_key"] == theirs["by_model"] == []
    before = await statement(gateway, org["api_key"], "2020-01")
    assert money(before, "opening_balance_inr", "closing_balance_inr") == (0, 0) and before["by_day"] == []
    assert await charges_csv(gateway, org["api_key"], "2020-01") == []


ARABIC_INDIC_2025_01 = "\u0662\u0660\u0662\u0665-\u0660\u0661"  # digits to int(), not to the API


@pytest.mark.parametrize("month", ["2025-13", "2025-00", "2025-1", "25-01", "2025-01-01", "x", ARABIC_INDIC_2025_01,
                                   "1969-12"])
async def test_a_malformed_month_is_a_400_naming_it(gateway, org, month):
    body = await statement(gateway, org["api_key"], month, 400)
    assert body["error"]["param"] == "month" and body["error"]["type"] == "invalid_request_error"


async def test_an_unknown_format_is_a_400_and_a_statement_needs_a_key(gateway, org):
    body = await statement(gateway, org["api_key"], "2025-01", 400, format="xml")
    assert body["error"]["param"] == "format"
    assert (await gateway.client.get("/v1/statements/2025-01")).status == 401


async def test_the_dashboard_offers_the_statement_and_the_ledger_export_as_downloads(gateway):
    page = await (await gateway.client.get("/dashboard")).text()
    for element in ('id="statement-month"', 'id="statement-json"', 'id="statement-csv"', 'id="ledger-export"'):
        assert element in page
    script = await (await gateway.client.get("/dashboard/static/downloads.js")).text()
    assert "/v1/statements/" in script and "/v1/ledger/events" in script and "createObjectURL" in script
