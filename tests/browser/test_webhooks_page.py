"""The dashboard's Webhooks section in Chromium (issue 29): an admin adds an endpoint at a real
receiver and sees its secret once, sends a test and sees it delivered in the endpoint's recent
deliveries; an endpoint whose receiver keeps failing is disabled, and the page says so on the tab
and at the top of the section, with the reason, until the admin enables it again; a key that is
not an admin's sees only a note."""

import re

import msgspec
import pytest

from gateway.accounts import admin
from gateway.config import WebhooksConfig
from tests.gateway.webhooks.receiver import Receiver
from tests.support import auth, poll


@pytest.fixture
async def receiver():
    running = Receiver()
    await running.start()
    yield running
    await running.stop()


@pytest.fixture
async def hooked(make_gateway, config):
    settings = WebhooksConfig(allowed_hosts=["127.0.0.1"], allow_http=True, poll_interval_s=0.05,
                              retry_first_s=0.05, retry_for_s=0.5)
    return await make_gateway(msgspec.structs.replace(config, webhooks=settings))


async def disabled(gateway, org: dict) -> None:
    """Until the gateway has disabled the org's (only) endpoint after its failures."""
    async def listed() -> bool:
        answer = await gateway.client.get("/v1/webhooks", headers=auth(org["api_key"]))
        return not (await answer.json())["data"][0]["enabled"]
    assert await poll(listed, timeout=10)


async def test_an_admin_adds_tests_and_re_enables_an_endpoint(hooked, receiver, ui):
    from playwright.async_api import expect

    org = await hooked.new_org("100")
    page = await ui.open(hooked)
    await ui.sign_in(page, org["api_key"])
    await ui.section(page, "Webhooks")
    await page.get_by_label("URL").fill(receiver.url)
    await page.get_by_label("key.budget").check()
    await page.get_by_label("Balance below (INR)").fill("50")
    await page.get_by_role("button", name="Add endpoint").click()
    secret = page.locator("#new-webhook-secret")
    await expect(secret).to_have_value(re.compile(r"^whsec_"))
    await expect(page.locator("#new-webhook")).to_contain_text("will not be shown again")
    receiver.secret = await secret.input_value()
    endpoint = page.locator("#webhooks-table tbody tr", has_text=receiver.url)
    await expect(endpoint.locator('[data-col="events"]')).to_have_text("balance.low, key.budget, credits.added")
    await expect(endpoint.locator('[data-col="state"]')).to_have_text("delivering")
    await ui.shot(page, "added")

    await endpoint.get_by_role("button", name=re.compile("^Send test")).click()
    await receiver.until(lambda r: len(r.got) == 1)
    assert receiver.got[0]["signed"] and receiver.got[0]["body"]["type"] == "webhook.test"
    delivered = page.locator("#deliveries-table tbody tr", has_text="webhook.test")
    await expect(delivered.locator('[data-col="result"]')).to_have_text("delivered")
    await expect(delivered.locator('[data-col="status"]')).to_have_text("204")
    await ui.shot(page, "tested")

    receiver.fail_next = 10_000
    await admin.add_credits(hooked.ledger.recorder, org["org_id"], "1")
    await disabled(hooked, org)
    await page.locator("#webhooks-refresh").click()
    banner = page.locator("#webhooks-disabled")
    await expect(banner).to_contain_text("Webhook disabled", timeout=10_000)
    await expect(banner).to_contain_text("kept failing")
    await expect(page.locator("#webhooks-badge")).to_have_text("1")
    await expect(endpoint.locator('[data-col="state"]')).to_have_text("disabled")
    failed = page.locator("#deliveries-table tbody tr", has_text="credits.added").first
    await expect(failed.locator('[data-col="status"]')).to_have_text("503")
    await ui.shot(page, "disabled")

    receiver.fail_next = 0
    await endpoint.get_by_role("button", name=re.compile("^Enable again")).click()
    await expect(banner).to_be_hidden()
    await expect(page.locator("#webhooks-badge")).to_be_hidden()
    await receiver.until(lambda r: r.got[-1]["body"]["type"] == "credits.added" and r.fail_next == 0
                         and len(r.got) > 3)
    await ui.healthy(page)


async def test_the_tab_says_an_endpoint_was_disabled_and_non_admins_see_a_note(hooked, receiver, ui):
    from playwright.async_api import expect

    org = await hooked.new_org("100")
    receiver.fail_next = 10_000
    created = await hooked.client.post("/v1/webhooks", headers=auth(org["api_key"]),
                                       json={"url": receiver.url, "events": ["credits.added"]})
    assert created.status == 201
    await admin.add_credits(hooked.ledger.recorder, org["org_id"], "1")
    await disabled(hooked, org)
    page = await ui.open(hooked)
    await ui.sign_in(page, org["api_key"])  # on the Overview: the tab carries the news
    await expect(page.locator("#webhooks-badge")).to_have_text("1", timeout=10_000)
    reader = await admin.create_key(hooked.ledger.recorder, org["org_id"], name="reader", admin=False)
    await hooked.ledger.follower.catch_up()
    await page.get_by_role("button", name="Sign out").click()
    await ui.sign_in(page, reader["api_key"])
    await ui.section(page, "Webhooks")
    await expect(page.locator("#webhooks-readonly")).to_be_visible()
    await expect(page.locator("#webhook-form")).to_be_hidden()
    await expect(page.locator("#webhooks-table tbody tr")).to_have_count(0)
    await ui.shot(page, "non-admin")
