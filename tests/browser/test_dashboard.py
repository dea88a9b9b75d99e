"""The dashboard in a real browser: sign-in, request log, details, music, keys, isolation,
phone width and CSP, against a real gateway, the upstream simulator and (music) an S3 server.

Helpers come from the `ui` fixture (tests/browser/conftest.py)."""

import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import msgspec

from gateway.accounts import admin
from gateway.edge.state import SERVICES
from tests.support import auth, chat_body, decimal_json, poll, post_chat
from sweeper.sweep import Sweeper

try:
    from playwright.async_api import expect
except ImportError:  # the `browser` fixture skips (or fails in CI) with the reason
    expect = None

XSS = '<script>window.__xss=1</script><img src=x onerror="window.__xss=2">'
SECTIONS = ("Overview", "Requests", "Music", "Keys")


def row(page, request_id: str):
    return page.locator(f'#log-table tr[data-id="{request_id}"]')


def track(page, track_id: str):
    return page.locator(f'#music-history article[data-id="{track_id}"]')


async def test_sign_in_keeps_the_key_in_session_storage_only(gateway, org, ui):
    page = await ui.open(gateway)
    await page.get_by_label("API key", exact=True).fill("gwk_not-a-real-key")
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.locator("#signin-error")).to_contain_text("not accepted (401)")
    await ui.shot(page, "wrong-key")

    await ui.sign_in(page, org["api_key"])
    await expect(page.locator("#balance")).to_contain_text("100")
    stored = await page.evaluate("Object.values(sessionStorage)")
    assert stored == [org["api_key"]]
    assert await page.evaluate("[localStorage.length, document.cookie]") == [0, ""]
    for name in SECTIONS:  # the URL names the section, never the key
        await ui.section(page, name)
        assert org["api_key"] not in page.url
    assert not [url for url in page.request_urls if org["api_key"] in url]
    await ui.shot(page, "signed-in")

    await page.get_by_role("button", name="Sign out").click()
    await expect(page.get_by_label("API key", exact=True)).to_be_visible()
    assert await page.evaluate("sessionStorage.length") == 0
    await ui.shot(page, "signed-out")

    # A key revoked while signed in: the next call answers 401 and the page signs out.
    other = await admin.create_key(gateway.ledger.recorder, org["org_id"], name="short-lived")
    await gateway.ledger.follower.catch_up()
    await ui.sign_in(page, other["api_key"])
    await admin.revoke_key(gateway.ledger.recorder, other["key_id"])
    await gateway.ledger.follower.catch_up()
    await page.get_by_role("button", name="Overview").click()  # its next call answers 401
    await expect(page.locator("#signin-error")).to_contain_text("signed out")
    assert await page.evaluate("sessionStorage.length") == 0


async def test_a_chat_request_shows_its_exact_cost(gateway, org, ui):
    response = await post_chat(gateway, org, chat_body("what does this cost?"))
    assert response.status == 200
    usage = decimal_json(await response.read())["usage"]
    request_id = response.headers["X-Request-Id"]

    page = await ui.open(gateway)
    await ui.sign_in(page, org["api_key"])
    await ui.section(page, "Requests")
    cells = row(page, request_id).locator("td")
    await expect(cells.first).to_have_text(request_id)
    assert Decimal(await row(page, request_id).locator('[data-col="cost_inr"]').inner_text()) == usage["cost_inr"]
    assert Decimal(await row(page, request_id).locator('[data-col="cost_usd"]').inner_text()) == usage["cost_usd_total"]
    rate = await row(page, request_id).locator('[data-col="rate"]').inner_text()
    assert rate.startswith("@ ") and Decimal(rate.removeprefix("@ ")) == usage["usd_to_inr"]
    tokens = f"{usage['prompt_tokens']}/{usage['completion_tokens']}"
    assert await row(page, request_id).locator('[data-col="tokens"]').inner_text() == tokens
    assert await row(page, request_id).locator('[data-col="status"]').inner_text() == "200"
    await ui.shot(page, "requests")
    await ui.section(page, "Overview")
    await expect(page.locator("#by-model tbody")).to_contain_text("gpt-4o-mini")
    await expect(page.locator("#daily-chart svg g.day")).to_have_count(30)
    await ui.shot(page, "overview")


async def test_filters_and_cursor_pages(gateway, org, ui):
    ids = [await ui.chat(gateway, org, f"mini {i} [sim:tokens=3]") for i in range(6)]
    for i in range(4):
        ids.append(await ui.chat(gateway, org, f"haiku {i}", model="claude-haiku-4-5", max_tokens=16))
    failing = await post_chat(gateway, org, chat_body("break [sim:status=500]"))
    await failing.read()
    assert failing.status >= 500
    ids.append(failing.headers["X-Request-Id"])
    newest_first = ids[::-1]

    page = await ui.open(gateway)
    await ui.sign_in(page, org["api_key"])
    await ui.section(page, "Requests")
    await ui.wait_for_ids(page, newest_first)
    await page.locator("#filter-model").select_option("claude-haiku-4-5")
    await ui.wait_for_ids(page, newest_first[1:5])
    await ui.shot(page, "by-model")
    await page.locator("#filter-model").select_option("")
    await page.locator("#filter-status").select_option(str(failing.status))
    await ui.wait_for_ids(page, newest_first[:1])
    await ui.shot(page, "by-status")
    await page.locator("#filter-status").select_option("")

    await page.locator("#page-size").select_option("5")
    pages = [newest_first[0:5], newest_first[5:10], newest_first[10:11]]
    older, newer = page.get_by_role("button", name="Older"), page.get_by_role("button", name="Newer")
    await ui.wait_for_ids(page, pages[0])
    await expect(newer).to_be_disabled()
    for expected in pages[1:]:
        await older.click()
        await ui.wait_for_ids(page, expected)
    await expect(older).to_be_disabled()
    await ui.shot(page, "last-page")
    for expected in (pages[1], pages[0]):
        await newer.click()
        await ui.wait_for_ids(page, expected)
    await expect(newer).to_be_disabled()


async def test_details_show_the_text_literally(gateway, org, ui):
    response = await post_chat(gateway, org, chat_body(XSS))
    answer = (await response.json())["choices"][0]["message"]["content"]
    request_id = response.headers["X-Request-Id"]
    quiet = await gateway.new_org("10", retention="none")
    quiet_id = await ui.chat(gateway, quiet, "keep nothing")

    page = await ui.open(gateway)
    await ui.sign_in(page, org["api_key"])
    await ui.section(page, "Requests")
    await row(page, request_id).get_by_role("button").click()
    dialog = page.locator("dialog#details")
    await expect(dialog.locator(".content-request")).to_contain_text(XSS)
    await expect(dialog.locator(".content-response")).to_contain_text(answer.strip())
    await expect(dialog.get_by_text(XSS)).to_be_visible()
    assert await page.evaluate("typeof window.__xss") == "undefined"
    assert await page.locator('img[src="x"]').count() == 0
    await expect(dialog.locator('[data-field="Request ID"]')).to_have_text(request_id)
    await ui.shot(page, "details")
    await page.get_by_role("button", name="Close").click()
    await expect(dialog).to_be_hidden()

    await page.get_by_role("button", name="Sign out").click()
    await ui.sign_in(page, quiet["api_key"])
    await ui.section(page, "Requests")
    await row(page, quiet_id).click()
    await expect(dialog.locator("#details-content")).to_have_text("Not retained")
    await ui.shot(page, "not-retained")

    # Text older than `text_days` removed by the sweeper: the details say so.
    await Sweeper(gateway.ledger.recorder, None, 30, 1).run_pass(as_of=datetime.now(UTC) + timedelta(days=2))
    await page.get_by_role("button", name="Close").click()
    await page.get_by_role("button", name="Sign out").click()
    await ui.sign_in(page, org["api_key"])
    await ui.section(page, "Requests")
    await row(page, request_id).click()
    await expect(dialog.locator("#details-content")).to_have_text("Removed by retention")


async def test_generate_a_track_and_seek_in_it(hosted, hosted_org, ui):
    page = await ui.open(hosted)
    await ui.sign_in(page, hosted_org["api_key"])
    await ui.section(page, "Music")
    await expect(page.locator("#music-model option")).to_have_count(2)
    await page.get_by_label("Prompt").fill("rainy night jazz [sim:latency_ms=2500]")
    await page.get_by_role("button", name="Generate").click()
    progress = page.locator("#music-progress progress")
    await expect(progress).to_be_visible()
    assert await progress.get_attribute("value") is None
    await expect(page.get_by_role("button", name="Generate")).to_be_disabled()
    await expect(page.locator("#music-elapsed")).to_have_text(re.compile(r"^[1-9]\d* s$"))
    await ui.shot(page, "progress")

    audio = page.locator("#music-result audio")
    await audio.wait_for()
    await page.wait_for_function("a => a.readyState >= 1 && a.duration > 0", arg=await audio.element_handle())
    duration = await audio.evaluate("a => a.duration")
    target = duration / 2
    reached = await audio.evaluate("""(a, target) => new Promise((resolve, reject) => {
        setTimeout(() => reject(new Error("no seeked event")), 10000);
        a.addEventListener("seeked", () => resolve(a.currentTime), {once: true});
        a.currentTime = target;
    })""", target)
    assert abs(reached - target) < 1.0
    download = page.locator("#music-result a", has_text="Download")
    assert (await download.get_attribute("href")).startswith("/media/")
    assert await download.get_attribute("download") is not None

    history = (await (await hosted.client.get("/v1/music", headers=auth(hosted_org["api_key"]))).json())["data"]
    item = track(page, history[0]["id"])
    await expect(item.locator(".lyrics pre")).to_have_text(history[0]["text"])
    await expect(item.locator("audio")).to_have_count(1)
    await ui.shot(page, "done")

    # The same generation in the request log: its prompt and the lyrics it came back with.
    await ui.section(page, "Requests")
    await row(page, history[0]["id"]).get_by_role("button").click()
    dialog = page.locator("dialog#details")
    await expect(dialog.locator(".content-request")).to_contain_text("rainy night jazz")
    await expect(dialog.locator(".content-response")).to_contain_text(history[0]["text"].strip().splitlines()[0])
    await ui.shot(page, "details")


async def test_an_expired_track_shows_as_expired(hosted, hosted_org, ui):
    generated = await ui.generate_music(hosted, hosted_org)
    page = await ui.open(hosted)
    await ui.sign_in(page, hosted_org["api_key"])
    await ui.section(page, "Music")
    await expect(track(page, generated["id"]).locator("audio")).to_have_count(1)

    store = hosted.server.app[SERVICES].store
    report = await Sweeper(hosted.ledger.recorder, store, 30, 0).run_pass(as_of=datetime.now(UTC) + timedelta(days=31))
    assert report.deleted == 1
    await hosted.ledger.follower.catch_up()
    await page.reload()
    item = track(page, generated["id"])
    await expect(item.locator(".badge")).to_have_text("Expired")
    await expect(item).to_contain_text(generated["text"].strip()[:40])
    assert await item.locator("audio").count() == 0
    await ui.shot(page, "expired")


async def test_another_orgs_requests_and_tracks_are_not_visible(gateway, org, ui):
    a_chat = await ui.chat(gateway, org, "org A secret")
    a_track = (await ui.generate_music(gateway, org, "org A song"))["id"]
    other = await gateway.new_org("10")
    b_chat = await ui.chat(gateway, other, "org B hello")

    page = await ui.open(gateway)
    await ui.sign_in(page, other["api_key"])
    await ui.section(page, "Requests")
    await ui.wait_for_ids(page, [b_chat])
    await ui.section(page, "Music")
    await expect(page.locator("#music-empty")).to_be_visible()
    content = await page.content()
    assert a_chat not in content and a_track not in content and "org A" not in content
    statuses = await page.evaluate("""async ([key, ids]) => Promise.all(ids.map(async (path) =>
        (await fetch(path, {headers: {Authorization: `Bearer ${key}`}})).status))""",
        [other["api_key"], [f"/v1/logs/{a_chat}", f"/v1/logs/{a_track}", f"/v1/music/{a_track}/link"]])
    assert statuses == [404, 404, 404]
    await ui.shot(page, "org-b")


async def test_keys_admin_creates_and_revokes_non_admin_only_lists(gateway, org, ui):
    limited = await gateway.client.post("/v1/keys", json={"name": "limited"}, headers=auth(org["api_key"]))
    assert limited.status == 201, await limited.text()
    limited_id = (await limited.json())["id"]
    limits = {"budget_inr": "25", "budget_period": "day", "models": ["gpt-4o-mini", "openai/*"],
              "expires_at": "2030-01-01T00:00:00Z"}
    patched = await gateway.client.patch(f"/v1/keys/{limited_id}", json=limits, headers=auth(org["api_key"]))
    assert patched.status == 200, await patched.text()
    listed = await patched.json()
    assert (listed["budget_period"], listed["models"], listed["expires_at"]) == (
        "day", ["gpt-4o-mini", "openai/*"], int(datetime(2030, 1, 1, tzinfo=UTC).timestamp()))
    await gateway.ledger.follower.catch_up()

    page = await ui.open(gateway)
    await ui.sign_in(page, org["api_key"])
    await ui.section(page, "Keys")
    limited_row = page.locator(f'#keys-table tr[data-id="{limited_id}"]')
    await expect(limited_row.locator('[data-col="budget"]')).to_have_text("₹25 / day")
    await expect(limited_row.locator('[data-col="spent"]')).to_have_text("0")
    await expect(limited_row.locator('[data-col="reserved"]')).to_have_text("0")
    await expect(limited_row.locator('[data-col="models"]')).to_have_text("gpt-4o-mini, openai/*")
    await expect(limited_row.locator('[data-col="expires"]')).to_have_text("2030-01-01 00:00 UTC")
    await expect(limited_row.locator('[data-col="expires"] time')).to_have_attribute(
        "datetime", "2030-01-01T00:00:00.000Z")
    unlimited_row = page.locator(f'#keys-table tr[data-id="{org["key_id"]}"]')
    await expect(unlimited_row.locator('[data-col="budget"]')).to_have_text("—")
    await expect(unlimited_row.locator('[data-col="models"]')).to_have_text("all")
    await expect(unlimited_row.locator('[data-col="expires"]')).to_have_text("never")
    await ui.shot(page, "limits")
    await page.get_by_label("Name").fill("ci-bot")
    await page.get_by_role("button", name="Create key").click()
    new_key = page.locator("#new-key-value")
    await expect(new_key).to_have_value(re.compile(r"^gwk_"))
    await expect(page.locator("#new-key")).to_contain_text("will not be shown again")
    created = await new_key.input_value()
    await ui.shot(page, "created")
    ci_row = page.locator("#keys-table tbody tr", has_text="ci-bot")
    await expect(ci_row.locator('[data-col="admin"]')).to_have_text("no")
    await expect(ci_row.locator('[data-col="models"]')).to_have_text("all")
    await expect(ci_row.locator('[data-col="expires"]')).to_have_text("never")
    assert (await post_chat(gateway, {"api_key": created}, chat_body())).status == 200
    own_row = page.locator(f'#keys-table tr[data-id="{org["key_id"]}"]')
    await expect(own_row.get_by_role("button")).to_have_count(0)  # never one's own key

    await ci_row.get_by_role("button", name=re.compile("^Revoke")).click()
    await ci_row.get_by_role("button", name="Confirm revoke").click()
    await expect(ci_row.locator('[data-col="revoked"] time')).to_have_count(1)
    await expect(ci_row.get_by_role("button")).to_have_count(0)
    await gateway.ledger.follower.catch_up()
    assert (await post_chat(gateway, {"api_key": created}, chat_body())).status == 401
    await ui.shot(page, "revoked")

    reader = await admin.create_key(gateway.ledger.recorder, org["org_id"], name="reader", admin=False)
    await gateway.ledger.follower.catch_up()
    await page.get_by_role("button", name="Sign out").click()
    await ui.sign_in(page, reader["api_key"])
    await ui.section(page, "Keys")
    await expect(page.locator("#keys-table tbody tr")).to_have_count(4)
    await expect(page.locator("#keys-readonly")).to_be_visible()
    await expect(page.locator("#key-form")).to_be_hidden()
    await expect(page.locator("#keys-table button")).to_have_count(0)
    await ui.shot(page, "non-admin")


async def test_phone_width_never_scrolls_sideways(hosted, hosted_org, ui):
    request_id = await ui.chat(hosted, hosted_org, "a long prompt " * 40)
    await ui.generate_music(hosted, hosted_org, "a very long prompt without spaces " + "x" * 300)
    page = await ui.open(hosted, viewport=ui.PHONE)
    await ui.sign_in(page, hosted_org["api_key"])
    overflow = "document.documentElement.scrollWidth <= window.innerWidth"
    for name in SECTIONS:
        await ui.section(page, name)
        await page.wait_for_load_state("networkidle")
        assert await page.evaluate(overflow), name
        await ui.shot(page, name.lower())
    await ui.section(page, "Requests")
    await row(page, request_id).get_by_role("button").click()
    await expect(page.locator("#details-content pre").first).to_be_visible()
    assert await page.evaluate(overflow)
    await ui.shot(page, "details")


async def test_csp_headers_and_no_violation(hosted, hosted_org, ui):
    request_id = await ui.chat(hosted, hosted_org, XSS)
    await ui.generate_music(hosted, hosted_org, XSS)
    page = await ui.open(hosted)
    headers = page.dashboard_response.headers
    csp = headers["content-security-policy"]
    for directive in ("default-src 'none'", "script-src 'self'", "style-src 'self'", "media-src 'self' blob:"):
        assert directive in csp
    assert headers["x-content-type-options"] == "nosniff" and headers["x-frame-options"] == "DENY"
    await ui.sign_in(page, hosted_org["api_key"])
    for name in SECTIONS:
        await ui.section(page, name)
        await page.wait_for_load_state("networkidle")
    await ui.section(page, "Music")
    await expect(page.locator("#music-history audio")).to_have_count(1)
    # Polled from here: wait_for_function re-evaluates a string with eval, which this page's CSP
    # (rightly) refuses whenever the first look is not already true.
    ready = await poll(lambda: page.evaluate("document.querySelector('#music-history audio').readyState"),
                       lambda state: state >= 1)
    assert ready >= 1
    await ui.section(page, "Requests")
    await row(page, request_id).get_by_role("button").click()
    await expect(page.locator("dialog#details")).to_contain_text(XSS)
    assert await page.evaluate("typeof window.__xss") == "undefined"
    await ui.shot(page, "used")
    await ui.healthy(page)


async def test_details_list_every_provider_a_request_tried(make_gateway, config, ui):
    # groq answers nothing (no server on its port): gpt-oss-120b fails over to openrouter.
    dead = msgspec.structs.replace(config.providers["groq"], base_url="http://127.0.0.1:1/v1")
    gateway = await make_gateway(msgspec.structs.replace(config, providers={**config.providers, "groq": dead}))
    org = await gateway.new_org("100")
    response = await post_chat(gateway, org, chat_body(model="gpt-oss-120b"))
    assert response.headers["X-Gateway-Provider"] == "openrouter"
    page = await ui.open(gateway)
    await ui.sign_in(page, org["api_key"])
    await ui.section(page, "Requests")
    await row(page, response.headers["X-Request-Id"]).get_by_role("button").click()
    dialog = page.locator("dialog#details")
    await expect(dialog.locator('[data-field="Provider"]')).to_have_text("openrouter")
    attempts = dialog.locator('[data-field="Attempts"] li')
    await expect(attempts).to_have_count(2)
    await expect(attempts.nth(0)).to_contain_text("groq: 502")
    await expect(attempts.nth(0)).to_contain_text("connection failed")
    await expect(attempts.nth(1)).to_have_attribute("data-provider", "openrouter")
    await expect(attempts.nth(1)).to_contain_text("openrouter: 200")
    await ui.shot(page, "attempts")


async def test_a_request_refused_by_a_key_budget_shows_why_in_its_details(gateway, org, ui):
    created = await gateway.client.post("/v1/keys", json={"name": "capped", "budget_inr": "0"},
                                        headers=auth(org["api_key"]))
    capped = await created.json()
    response = await post_chat(gateway, {**org, "api_key": capped["api_key"]}, chat_body())
    assert response.status == 402
    reason = (await response.json())["error"]["message"]
    page = await ui.open(gateway)
    await ui.sign_in(page, org["api_key"])
    await ui.section(page, "Requests")
    refused = row(page, response.headers["X-Request-Id"])
    await expect(refused).to_contain_text("402")
    await refused.get_by_role("button").click()
    dialog = page.locator("dialog#details")
    await expect(dialog.locator('[data-field="Error"]')).to_have_text(reason)
    assert "key budget exceeded" in reason
    await ui.shot(page, "refused")


async def test_the_months_statement_and_the_ledger_export_download_as_files(gateway, org, ui):
    await ui.chat(gateway, org, "what did this month cost?")
    month = datetime.now(UTC).strftime("%Y-%m")
    page = await ui.open(gateway)
    await ui.sign_in(page, org["api_key"])
    await expect(page.locator("#statement-month")).to_have_value(month)  # this UTC month by default
    saved = {}
    for button, name in (("Statement (JSON)", f"statement-{month}.json"), ("Charges (CSV)", f"statement-{month}.csv"),
                         ("Ledger export (NDJSON, admin keys)", "ledger-events.ndjson")):
        async with page.expect_download() as download:
            await page.get_by_role("button", name=button).click()
        got = await download.value
        assert got.suggested_filename == name
        saved[name] = (await got.path()).read_bytes()
    response = await gateway.client.get(f"/v1/statements/{month}?format=csv", headers=auth(org["api_key"]))
    assert saved[f"statement-{month}.csv"] == await response.read()
    statement = decimal_json(saved[f"statement-{month}.json"])
    assert (statement["org_id"], statement["requests"]) == (org["org_id"], 1)
    assert Decimal(statement["charges_inr"]) == sum(Decimal(line.rsplit(b",", 1)[1].decode())
                                                    for line in saved[f"statement-{month}.csv"].splitlines()[1:])
    assert org["org_id"].encode() in saved["ledger-events.ndjson"]
    assert not [url for url in page.request_urls if org["api_key"] in url]
    await ui.shot(page, "downloads")
