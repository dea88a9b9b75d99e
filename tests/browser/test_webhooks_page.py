"""The dashboard's Webhooks section in Chromium (issue 29), against a real receiver
(tests/conftest.py's `receiver`): an admin's 400s are said in the error line; an admin adds an
endpoint and sees its secret once, sends a test and sees it delivered in the endpoint's recent
deliveries; an endpoint whose receiver keeps failing shows its failed attempts and next try, then
is disabled, and the page says so on the tab and at the top of the section, with the reason, until
the admin enables it again; removing asks twice; a key that is not an admin's sees only a note;
at phone width nothing scrolls sideways."""

import re

import msgspec
import pytest

from gateway.accounts import admin
from gateway.config import WebhooksConfig
from tests.support import auth, poll


@pytest.fixture
async def hooked(make_gateway, config):
    settings = WebhooksConfig(allowed_hosts=["127.0.0.1"], allow_http=True, poll_interval_s=0.05,
                              retry_first_s=0.05, retry_for_s=0.5)
    return await make_gateway(msgspec.structs.replace(config, webhooks=settings))


@pytest.fixture
async def slow_retries(make_gateway, config):
    """A gateway that waits long between tries: a failing endpoint stays failing (not disabled) a while."""
    settings = WebhooksConfig(allowed_hosts=["127.0.0.1"], allow_http=True, poll_interval_s=0.05,
                              retry_first_s=120, retry_for_s=3600)
    return await make_gateway(msgspec.structs.replace(config, webhooks=settings))


async def disabled(gateway, org: dict) -> None:
    """Until the gateway has disabled the org's (only) endpoint after its failures."""
    async def listed() -> bool:
        answer = await gateway.client.get("/v1/webhooks", headers=auth(org["api_key"]))
        return not (await answer.json())["data"][0]["enabled"]
    assert await poll(listed, timeout=10)


async def healthy(ui, page, *refused: int) -> None:
    """No uncaught exception and no CSP violation; the console's only errors are the answers the
    test provoked (Chromium logs every 4xx the page fetched, e.g. a 400 for a refused URL)."""
    expected = {f"the server responded with a status of {status} " for status in refused}
    page.console_errors[:] = [e for e in page.console_errors
                              if not (e.startswith("Failed to load resource") and any(x in e for x in expected))]
    await ui.healthy(page)


async def test_an_admin_adds_tests_and_re_enables_an_endpoint(hooked, receiver, ui):
    from playwright.async_api import expect

    org = await hooked.new_org("100")
    page = await ui.open(hooked)
    await ui.sign_in(page, org["api_key"])
    await ui.section(page, "Webhooks")
    await expect(page.locator("#webhooks-empty")).to_be_visible()
    error = page.locator("#webhooks-error")

    # The API's 400s are said in the error line, and nothing is added.
    await page.get_by_label("URL").fill(receiver.url)
    await page.get_by_role("button", name="Add endpoint").click()  # balance.low without its threshold
    await expect(error).to_contain_text("balance.low needs balance_low_inr")
    await page.get_by_label("URL").fill("ftp://127.0.0.1/hook")
    await page.get_by_label("Balance below (INR)").fill("50")
    await page.get_by_role("button", name="Add endpoint").click()
    await expect(error).to_contain_text("webhook url refused")
    await expect(page.locator("#webhooks-table tbody tr")).to_have_count(0)
    await expect(page.locator("#new-webhook")).to_be_hidden()

    await page.get_by_label("URL").fill(receiver.url)
    await page.get_by_label("key.budget").check()
    await page.get_by_role("button", name="Add endpoint").click()
    secret = page.locator("#new-webhook-secret")
    await expect(secret).to_have_value(re.compile(r"^whsec_"))
    await expect(error).to_be_hidden()
    await expect(page.locator("#new-webhook")).to_contain_text("will not be shown again")
    await expect(page.locator("#new-webhook-url")).to_have_text(receiver.url)
    receiver.secret = await secret.input_value()
    endpoint = page.locator("#webhooks-table tbody tr", has_text=receiver.url)
    await expect(endpoint.locator('[data-col="events"]')).to_have_text(
        "balance.low (below ₹50), key.budget (50/80/100%), credits.added")
    await expect(endpoint.locator('[data-col="state"]')).to_have_text("delivering")
    await expect(page.locator("#webhooks-empty")).to_be_hidden()
    await ui.shot(page, "added")
    # Shown once: listed again (here, after signing in anew), the page has no secret anywhere.
    await page.get_by_role("button", name="Done").click()
    await expect(secret).to_have_value("")
    await page.get_by_role("button", name="Sign out").click()
    await ui.sign_in(page, org["api_key"])
    await ui.section(page, "Webhooks")
    await expect(endpoint).to_have_count(1)
    assert receiver.secret not in await page.content()
    assert (await page.locator("#new-webhook").is_hidden()) and await secret.input_value() == ""

    await endpoint.get_by_role("button", name=re.compile("^Send test")).click()
    await receiver.until(lambda r: len(r.got) == 1)
    assert receiver.got[0]["signed"] and receiver.got[0]["body"]["type"] == "webhook.test"
    await expect(page.locator("#webhook-deliveries-url")).to_have_text(receiver.url)
    await expect(endpoint).to_have_class(re.compile(r"\bselected\b"))
    delivered = page.locator("#deliveries-table tbody tr", has_text="webhook.test")
    await expect(delivered).to_have_count(1)
    await expect(delivered.locator('[data-col="message"]')).to_have_text(receiver.got[0]["id"])
    await expect(delivered.locator('[data-col="result"]')).to_have_text("delivered")
    await expect(delivered.locator('[data-col="status"]')).to_have_text("204")
    await ui.shot(page, "tested")

    receiver.fail_next = 10_000
    await admin.add_credits(hooked.ledger.recorder, org["org_id"], "1")
    await disabled(hooked, org)
    await page.locator("#webhooks-refresh").click()
    banner = page.locator("#webhooks-disabled")
    await expect(banner).to_contain_text("Webhook disabled", timeout=10_000)
    await expect(banner).to_contain_text(receiver.url)
    await expect(banner).to_contain_text("kept failing")
    await expect(banner).to_contain_text("HTTP 503")
    await expect(page.locator("#webhooks-badge")).to_have_text("1")
    await expect(endpoint.locator('[data-col="state"] .badge')).to_have_text("disabled")
    await expect(endpoint.locator('[data-col="reason"]')).to_contain_text("kept failing")
    failed = page.locator("#deliveries-table tbody tr", has_text="credits.added").first
    await expect(failed.locator('[data-col="status"]')).to_have_text("503")
    await expect(failed.locator('[data-col="result"] .badge')).to_have_text("failed")
    await expect(failed.locator('[data-col="error"]')).to_contain_text("503")
    await ui.shot(page, "disabled")

    receiver.fail_next = 0
    got = len(receiver.got)
    await endpoint.get_by_role("button", name=re.compile("^Enable again")).click()
    await expect(banner).to_be_hidden()
    await expect(page.locator("#webhooks-badge")).to_be_hidden()
    await expect(endpoint.get_by_role("button", name=re.compile("^Enable again"))).to_have_count(0)
    await receiver.until(lambda r: len(r.got) > got and r.got[-1]["body"]["type"] == "credits.added")
    await page.locator("#webhooks-refresh").click()
    await expect(endpoint.locator('[data-col="state"]')).to_have_text("delivering")
    await expect(page.locator("#deliveries-table tbody tr").first.locator('[data-col="result"]')).to_have_text(
        "delivered")

    # Removing asks a second time; Cancel keeps the endpoint, Confirm removes it.
    await endpoint.get_by_role("button", name=re.compile("^Remove")).click()
    await endpoint.get_by_role("button", name="Cancel").click()
    await expect(endpoint).to_have_count(1)
    await endpoint.get_by_role("button", name=re.compile("^Remove")).click()
    await endpoint.get_by_role("button", name=re.compile("^Confirm remove")).click()
    await expect(endpoint).to_have_count(0)
    await expect(page.locator("#webhook-deliveries")).to_be_hidden()
    await expect(page.locator("#webhooks-empty")).to_be_visible()
    listed = await hooked.client.get("/v1/webhooks", headers=auth(org["api_key"]))
    assert (await listed.json())["data"] == []
    await healthy(ui, page, 400)


async def test_a_failing_endpoint_shows_its_failures_and_next_try(slow_retries, receiver, ui):
    from playwright.async_api import expect

    org = await slow_retries.new_org("100")
    receiver.fail_next = 10_000
    created = await slow_retries.client.post("/v1/webhooks", headers=auth(org["api_key"]),
                                             json={"url": receiver.url, "events": ["credits.added"]})
    assert created.status == 201
    await admin.add_credits(slow_retries.ledger.recorder, org["org_id"], "1")
    await receiver.until(lambda r: len(r.got) == 1)

    async def failing() -> dict:
        answer = await slow_retries.client.get("/v1/webhooks", headers=auth(org["api_key"]))
        return (await answer.json())["data"][0]
    listed = await poll(failing, lambda item: item["failed_attempts"] == 1 and item["next_attempt_at"])
    assert listed["enabled"] and listed["next_attempt_at"] > listed["failing_since"]

    page = await ui.open(slow_retries)
    await ui.sign_in(page, org["api_key"])
    await ui.section(page, "Webhooks")
    endpoint = page.locator("#webhooks-table tbody tr", has_text=receiver.url)
    await expect(endpoint.locator('[data-col="state"] .badge')).to_have_text("failing")
    note = endpoint.locator('[data-col="failing"]')
    await expect(note).to_contain_text("1 failed attempt since")
    await expect(note).to_contain_text("next try")
    next_try = note.locator("time").last
    await expect(next_try).to_have_attribute("datetime", re.compile(r"^\d{4}-\d\d-\d\dT"))
    assert await next_try.get_attribute("datetime") == \
        await page.evaluate("(s) => new Date(s * 1000).toISOString()", listed["next_attempt_at"])
    await expect(page.locator("#webhooks-disabled")).to_be_hidden()  # failing is not disabled
    await expect(page.locator("#webhooks-badge")).to_be_hidden()

    await endpoint.get_by_role("button", name=re.compile("^Deliveries")).click()
    failed = page.locator("#deliveries-table tbody tr")
    await expect(failed).to_have_count(1)
    await expect(failed.locator('[data-col="type"]')).to_have_text("credits.added")
    await expect(failed.locator('[data-col="status"]')).to_have_text("503")
    await expect(failed.locator('[data-col="error"]')).to_contain_text("503")
    await ui.shot(page, "failing")
    await page.locator("#webhook-deliveries-close").click()
    await expect(page.locator("#webhook-deliveries")).to_be_hidden()
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
    await expect(page.locator("section#overview")).to_be_visible()
    await expect(page.locator("#webhooks-badge")).to_have_text("1", timeout=10_000)
    await ui.section(page, "Webhooks")
    await expect(page.locator("#webhooks-disabled")).to_contain_text(receiver.url)
    reader = await admin.create_key(hooked.ledger.recorder, org["org_id"], name="reader", admin=False)
    await hooked.ledger.follower.catch_up()
    await page.get_by_role("button", name="Sign out").click()
    await ui.sign_in(page, reader["api_key"])
    await ui.section(page, "Webhooks")
    await expect(page.locator("#webhooks-readonly")).to_be_visible()
    await expect(page.locator("#webhooks-readonly")).to_contain_text("Only admin keys")
    await expect(page.locator("#webhook-form")).to_be_hidden()
    await expect(page.locator("#webhooks-table tbody tr")).to_have_count(0)
    await expect(page.locator("#webhooks-disabled")).to_be_hidden()
    await expect(page.locator("#webhooks-badge")).to_be_hidden()
    await expect(page.locator("#webhooks-error")).to_be_hidden()
    await ui.shot(page, "non-admin")
    await healthy(ui, page, 403)


async def test_webhooks_at_phone_width_never_scroll_sideways(hooked, receiver, ui):
    from playwright.async_api import expect

    org = await hooked.new_org("100")
    long_url = receiver.url + "?" + "x" * 300
    for url in (receiver.url, long_url):
        created = await hooked.client.post("/v1/webhooks", headers=auth(org["api_key"]),
                                           json={"url": url, "events": ["credits.added"]})
        assert created.status == 201, await created.text()
    receiver.fail_next = 10_000
    await admin.add_credits(hooked.ledger.recorder, org["org_id"], "1")

    async def both_disabled() -> bool:
        answer = await hooked.client.get("/v1/webhooks", headers=auth(org["api_key"]))
        return not any(item["enabled"] for item in (await answer.json())["data"])
    assert await poll(both_disabled, timeout=10)
    page = await ui.open(hooked, viewport=ui.PHONE)
    await ui.sign_in(page, org["api_key"])
    await ui.section(page, "Webhooks")
    await expect(page.locator("#webhooks-disabled p")).to_have_count(2)
    await page.locator("#webhooks-table tbody tr").first.get_by_role("button", name=re.compile("^Deliveries")).click()
    await expect(page.locator("#webhook-deliveries")).to_be_visible()
    assert await page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    await ui.shot(page, "phone")
    await ui.healthy(page)
