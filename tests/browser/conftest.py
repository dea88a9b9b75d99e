"""Browser tests of the dashboard: Debian's Chromium driven by Playwright's async API.

The gateway fixtures of tests/conftest.py serve the page on a real socket; each test launches
Chromium (headless), opens /dashboard and acts as a user would. Screenshots go to
test-artifacts/dashboard/<test>-<step>.png. Without /usr/bin/chromium (or Playwright) the tests
skip, and fail when CI=true.
"""

import os
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.support import IN_CI, auth, chat_body, post_chat

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
TIMEOUT_MS = 15_000
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "dashboard"

# Records CSP violations and uncaught errors from the first script of every document on.
WATCH_SCRIPT = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__cspViolations.push(`${e.violatedDirective} blocked ${e.blockedURI || "inline"}`);
});
"""


def _unavailable(reason: str) -> None:
    if IN_CI:
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture
async def browser():
    """A headless Chromium for one test."""
    if not os.access(CHROMIUM, os.X_OK):
        _unavailable(f"{CHROMIUM} is missing: the dashboard's browser tests need Debian's Chromium")
    try:
        from playwright.async_api import async_playwright, expect
    except ImportError as exc:
        _unavailable(f"Playwright is not installed: {exc}")
    expect.set_options(timeout=TIMEOUT_MS)  # expect()'s own default is 5 s
    async with async_playwright() as playwright:
        chromium = await playwright.chromium.launch(
            executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True, timeout=TIMEOUT_MS)
        try:
            yield chromium
        finally:
            await chromium.close()


@pytest.fixture
def ui(open_page, shot) -> SimpleNamespace:
    """The helpers in one fixture: `ui.open(gateway)`, `ui.sign_in(page, key)`, `ui.shot(page, step)`..."""
    return SimpleNamespace(
        open=open_page, shot=shot, sign_in=sign_in, section=open_section, wait_for_ids=wait_for_ids,
        chat=chat, generate_music=generate_music, healthy=assert_page_healthy, PHONE=PHONE, DESKTOP=DESKTOP)


@pytest.fixture
def open_page(browser):
    """`await open_page(gateway, viewport=PHONE)`: a new tab on the gateway's /dashboard.

    The page records console errors in `page.console_errors`, uncaught exceptions in
    `page.page_errors` (the test fails if any page had one) and the URL of every request it made
    in `page.request_urls`; every wait is bounded by TIMEOUT_MS.
    """
    pages = []

    async def open_(gateway, viewport: dict = DESKTOP):
        context = await browser.new_context(viewport=viewport, base_url=gateway.url)
        context.set_default_timeout(TIMEOUT_MS)
        context.set_default_navigation_timeout(TIMEOUT_MS)
        await context.add_init_script(WATCH_SCRIPT)
        page = await context.new_page()
        page.console_errors, page.page_errors, page.request_urls = [], [], []
        page.on("request", lambda request: page.request_urls.append(request.url))
        page.on("console", lambda message: message.type == "error" and page.console_errors.append(message.text))
        page.on("pageerror", lambda error: page.page_errors.append(str(error)))
        pages.append(page)
        page.dashboard_response = await page.goto("/dashboard")
        return page
    yield open_
    assert [error for page in pages for error in page.page_errors] == [], "uncaught errors in the page"


@pytest.fixture
def shot(request):
    """`await shot(page, "step")` saves test-artifacts/dashboard/<test name>-<step>.png."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)

    async def take(page, step: str) -> Path:
        return await screenshot(page, f"{name}-{step}")
    return take


async def screenshot(page, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    await page.screenshot(path=str(path), full_page=True)
    return path


async def sign_in(page, key: str) -> None:
    """Signs in through the form and waits for the sections' navigation."""
    await page.get_by_label("API key", exact=True).fill(key)
    await page.get_by_role("button", name="Sign in").click()
    await page.get_by_role("navigation", name="Sections").wait_for()


async def open_section(page, name: str) -> None:
    """Clicks a section's button ("Overview", "Requests", "Music", "Keys") and waits for it."""
    await page.get_by_role("navigation", name="Sections").get_by_role("button", name=name).click()
    await page.locator(f"section#{name.lower()}").wait_for()


async def wait_for_ids(page, expected: list[str], table: str = "#log-table") -> None:
    """Waits until the table shows exactly `expected` (ids, in order)."""
    await page.wait_for_function(
        """([selector, ids]) => JSON.stringify([...document.querySelectorAll(selector)].map(r => r.dataset.id))
                              === JSON.stringify(ids)""",
        arg=[f"{table} tbody tr[data-id]", expected], timeout=TIMEOUT_MS)


async def chat(gateway, org: dict, text: str = "hello there", **extra) -> str:
    """A chat completion through the API; its request id."""
    response = await post_chat(gateway, org, chat_body(text, **extra))
    await response.read()
    return response.headers["X-Request-Id"]


async def generate_music(gateway, org: dict, prompt: str = "calm lo-fi beat with soft piano") -> dict:
    response = await gateway.client.post("/v1/music", json={"model": "tune-3-clip-preview", "prompt": prompt},
                                         headers=auth(org["api_key"]))
    assert response.status == 200, await response.text()
    return await response.json()


async def assert_page_healthy(page) -> None:
    """No uncaught exception, no console error, no CSP violation so far."""
    violations = await page.evaluate("window.__cspViolations")
    assert (page.page_errors, page.console_errors, violations) == ([], [], [])
