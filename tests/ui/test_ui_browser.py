"""The viewer in Debian's chromium via Playwright: filter, open, follow a tool call, log in.

Screenshots land in test-artifacts/ at 1280 and 390 pixels wide.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.harness import Gateway, GatewayFactory, database_url, gateway, make_gateway, provider  # noqa: F401
from tests.ui.scenarios import SCRIPT, Runs, all_runs, weather_run

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
WIDE, PHONE = {"width": 1280, "height": 900}, {"width": 390, "height": 844}
TOKEN = "browser-admin-token-0123456789"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="Debian chromium missing: apt-get install chromium"
    ),
]


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        chromium = await pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield chromium
        await chromium.close()


async def new_page(browser: Any, viewport: dict[str, int] = WIDE) -> Any:
    context = await browser.new_context(viewport=viewport)
    page = await context.new_page()
    page.dialogs = []
    page.on("dialog", lambda dialog: page.dialogs.append(dialog.message))
    page.console_errors = []
    page.on("console", lambda m: m.type == "error" and page.console_errors.append(m.text))
    return page


async def shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    await page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


async def test_filter_open_trace_and_follow_a_tool_call(browser: Any, gateway: Gateway) -> None:
    runs: Runs = await all_runs(gateway)
    page = await new_page(browser)
    await page.goto(gateway.url + "/")
    await shot(page, "traces-1280")
    await page.select_option("select[name=violation]", "truncated_tool_call")
    await page.click(".filters button[type=submit]")
    await page.wait_for_url("**violation=truncated_tool_call**")
    assert await page.locator("tr[data-id]").count() == 1
    await page.goto(gateway.url + "/")
    await page.click(f'tr[data-id="{runs.weather}"] td.trace-id a')
    await page.wait_for_url(f"**/traces/{runs.weather}")
    await shot(page, "trace-1280")
    link = page.locator("li.item.k-tool_call", has_text="call_tokyo").locator("a.pair")
    target = (await link.get_attribute("href")).lstrip("#")
    await link.click()
    await page.wait_for_url(f"**#{target}")
    result = page.locator(f"#{target}")
    assert await result.evaluate("el => el.matches(':target')")
    assert "tool_result" in (await result.get_attribute("class"))
    await result.wait_for(state="visible")
    assert await result.is_visible() and "rainy" in await result.inner_text()
    await result.locator("a.pair").click()  # and back to the call
    await page.wait_for_function(
        "document.querySelector(':target').classList.contains('k-tool_call')"
    )
    assert page.console_errors == [] and page.dialogs == []


async def test_phone_width_screenshots(browser: Any, gateway: Gateway) -> None:
    runs = await all_runs(gateway)
    page = await new_page(browser, PHONE)
    for name, path in (
        ("traces", "/"),
        ("trace", f"/traces/{runs.weather}"),
        ("violations", "/violations"),
    ):
        await page.goto(gateway.url + path)
        width = await page.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"], f"{path} scrolls sideways on a phone ({width}px)"
        await shot(page, f"{name}-390")
    await page.goto(gateway.url + "/violations")
    await page.set_viewport_size(WIDE)
    await shot(page, "violations-1280")
    await page.emulate_media(color_scheme="dark")
    await page.goto(gateway.url + f"/traces/{runs.truncated}")
    await shot(page, "trace-dark-1280")


async def test_html_payload_fires_no_dialog(browser: Any, gateway: Gateway) -> None:
    runs = await all_runs(gateway)
    page = await new_page(browser)
    for path in (f"/traces/{runs.payload}", "/"):
        await page.goto(gateway.url + path)
        await page.wait_for_load_state("load")
    await page.goto(gateway.url + f"/traces/{runs.payload}")
    await asyncio.sleep(0.3)
    assert page.dialogs == []
    assert await page.locator("img[src=x]").count() == 0
    assert await page.get_by_text(SCRIPT).first.is_visible()


async def test_new_traces_appear_without_a_reload(browser: Any, gateway: Gateway) -> None:
    page = await new_page(browser)
    await page.goto(gateway.url + "/")
    await shot(page, "empty-1280")
    await page.evaluate("window.marker = 'same page'")
    await weather_run(gateway)
    await page.wait_for_selector('tr[data-id="ui-weather"]', timeout=15_000)
    assert await page.evaluate("window.marker") == "same page"


async def test_login_with_the_token(browser: Any, make_gateway: GatewayFactory) -> None:
    gw = await make_gateway(admin_token=TOKEN)
    page = await new_page(browser)
    await page.goto(gw.url + "/violations")
    await page.wait_for_url("**/login?next=**")
    await page.fill("#token", "wrong-token-but-long-enough")
    await page.click("form button[type=submit]")
    assert "not the admin token" in await page.inner_text("[role=alert]")
    await page.fill("#token", TOKEN)
    await shot(page, "login-1280")
    await page.click("form button[type=submit]")
    await page.wait_for_url(gw.url + "/violations")
    cookies = await page.context.cookies()
    assert [(c["httpOnly"], c["sameSite"]) for c in cookies] == [(True, "Strict")]
    await page.click("text=Log out")
    await page.wait_for_url("**/login")
