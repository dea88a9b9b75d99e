"""The dashboard's Batches section in Chromium (issue 39): a batch the gateway ran, one of its lines
refused upstream, is listed with its status, its progress (lines succeeded and failed of its total),
its exact cost and its times; its output and error files download through the page (fetched with
the session key, never put in a URL) with the bytes GET /v1/files/{id}/content serves."""

import json
from decimal import Decimal

from tests.gateway.batches.batch_support import chat_lines, ended, lines_recorded, openai_sdk, upload

try:
    from playwright.async_api import expect
except ImportError:  # the `browser` fixture skips (or fails in CI) with the reason
    expect = None


def refused_line(model: str) -> bytes:
    """A line the simulator answers 400: recorded as failed, written to the error file."""
    return json.dumps({"custom_id": "line-refused", "method": "POST", "url": "/v1/chat/completions", "body": {
        "model": model, "messages": [{"role": "user", "content": "[sim:status=400] no"}], "max_tokens": 20}}
                      ).encode() + b"\n"


async def test_a_finished_batch_shows_its_progress_cost_and_files(gateway, org, ui):
    client = openai_sdk(gateway, org)
    model = "gemini-2.5-flash"
    batch = await client.batches.create(input_file_id=await upload(client, chat_lines(model, 2) + refused_line(model)),
                                        endpoint="/v1/chat/completions", completion_window="24h")
    done = await ended(client, batch.id)
    assert (done.status, done.request_counts.completed, done.request_counts.failed) == ("completed", 2, 1)
    charged = sum(e.charged_inr_nano for e in await lines_recorded(gateway, batch.id))
    page = await ui.open(gateway)
    await ui.sign_in(page, org["api_key"])
    await ui.section(page, "Batches")
    row = page.locator(f'#batches-table tr[data-id="{batch.id}"]')
    await expect(row.locator('[data-col="status"]')).to_have_text("completed")
    await expect(row.locator('[data-col="progress"]')).to_contain_text("2 succeeded · 1 failed of 3")
    progress = row.locator("progress")
    assert (await progress.get_attribute("value"), await progress.get_attribute("max")) == ("3", "3")
    assert Decimal(await row.locator('[data-col="cost"]').inner_text()) == Decimal(charged) / 10**9 > 0
    assert await row.locator('[data-col="ended"] time').count() == 1
    for label, file_id, name in (("Output", done.output_file_id, f"{batch.id}_output.jsonl"),
                                 ("Errors", done.error_file_id, f"{batch.id}_errors.jsonl")):
        async with page.expect_download() as download:
            await row.get_by_role("button", name=label).click()
        got = await download.value
        assert got.suggested_filename == name
        assert (await got.path()).read_bytes() == (await client.files.content(file_id)).content
    assert not [url for url in page.request_urls if org["api_key"] in url]
    await ui.shot(page, "batches")
    await ui.healthy(page)


async def test_no_batches_says_so_and_a_phone_never_scrolls_sideways(gateway, org, ui):
    page = await ui.open(gateway, viewport=ui.PHONE)
    await ui.sign_in(page, org["api_key"])
    await ui.section(page, "Batches")
    await expect(page.locator("#batches-empty")).to_be_visible()
    client = openai_sdk(gateway, org)
    batch = await client.batches.create(input_file_id=await upload(client, chat_lines("gemini-2.5-flash", 1)),
                                        endpoint="/v1/chat/completions", completion_window="24h")
    await ended(client, batch.id)
    await page.get_by_role("button", name="Refresh").click()
    await expect(page.locator(f'#batches-table tr[data-id="{batch.id}"]')).to_be_visible()
    assert await page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    await ui.shot(page, "phone")
    await ui.healthy(page)
