"""The Keys page and the overview name escrow (issue 36): credit a gateway process took ahead for a
budgeted key's requests shows as "Taken ahead (escrow)", apart from "Reserved by running
requests", each figure the API's own text."""

from decimal import Decimal

import msgspec

from tests.support import auth, chat_body, decimal_json, poll


async def test_the_keys_page_shows_a_slice_as_taken_ahead_not_as_reserved(make_gateway, config, ui):
    from playwright.async_api import expect

    gateway = await make_gateway(msgspec.structs.replace(
        config, billing=msgspec.structs.replace(config.billing, escrow_idle_s=60)))
    org = await gateway.new_org("100")
    created = await gateway.client.post("/v1/keys", json={"name": "budgeted", "budget_inr": "50"},
                                        headers=auth(org["api_key"]))
    key = await created.json()
    for text in ("warm up", "from the slice"):  # the first holds on its own; a slice follows it
        response = await gateway.client.post("/v1/chat/completions", json=chat_body(text, max_tokens=5),
                                             headers=auth(key["api_key"]))
        assert response.status == 200, await response.text()

    async def listed() -> dict:
        body = decimal_json(await (await gateway.client.get("/v1/keys", headers=auth(org["api_key"]))).read())
        return next(item for item in body["data"] if item["id"] == key["id"])

    item = await poll(listed, lambda item: Decimal(item["escrow_inr"]) > 0)
    assert Decimal(item["reserved_inr"]) == 0 and Decimal(item["escrow_inr"]) > 0

    page = await ui.open(gateway)
    await ui.sign_in(page, org["api_key"])
    await expect(page.locator("#balance-note")).to_contain_text(f"taken ahead (escrow) {item['escrow_inr']}")
    await expect(page.locator("#balance-note")).not_to_contain_text("reserved by running requests")
    await ui.shot(page, "overview")
    await ui.section(page, "Keys")
    table = page.locator("#keys-table")
    for name in ("Reserved (INR)", "By running requests", "Taken ahead (escrow)"):
        await expect(table.get_by_role("columnheader", name=name, exact=True)).to_be_visible()
    row = page.locator(f'#keys-table tr[data-id="{key["id"]}"]')
    await expect(row.locator('[data-col="reserved"]')).to_have_text("0")
    await expect(row.locator('[data-col="escrow"]')).to_have_text(str(item["escrow_inr"]))
    own = page.locator(f'#keys-table tr[data-id="{org["key_id"]}"]')
    await expect(own.locator('[data-col="escrow"]')).to_have_text("0")  # no budget: its requests use the org's
    await expect(page.locator("#keys-escrow-note")).to_contain_text("Nothing is spent by it")
    await ui.shot(page, "escrow")
    await ui.healthy(page)
