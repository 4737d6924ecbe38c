"""The viewer in Debian's chromium via Playwright, as a user sees and drives it.

Screenshots land in test-artifacts/ at 1280 and 390 pixels wide, light and dark.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from gateway.store.write.writer import StoreWriter
from gateway.ui.pages.rendering import make_environment
from gateway.ui.pages.routes import CSP
from gateway.ui.views.present import trace_view
from tests.factories import T_JSON, long_run
from tests.harness import Gateway, GatewayFactory, gateway, make_gateway, provider  # noqa: F401
from tests.ui.scenarios import (
    SCRIPT,
    SEARCH_FOUND,
    SEARCH_ID,
    Runs,
    all_runs,
    first_step_only,
    next_step,
    refused_run,
    retry_run,
    search_run,
    weather_run,
)
from tests.ui.test_ui_render import hostile_trace

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[3] / "test-artifacts"
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
FOCUSED_ROW = "document.activeElement.closest('details.row')?.id"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.sqlite,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="Debian chromium missing: apt-get install chromium"
    ),
]


def expect(locator: Any) -> Any:
    from playwright.async_api import expect as playwright_expect

    return playwright_expect(locator)


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        chromium = await pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield chromium
        await chromium.close()


async def new_page(browser: Any, viewport: dict[str, int] = WIDE, **options: Any) -> Any:
    context = await browser.new_context(viewport=viewport, **options)
    page = await context.new_page()
    page.dialogs = []
    page.on("dialog", lambda dialog: page.dialogs.append(dialog.message))
    page.console_errors = []
    page.on("console", lambda m: m.type == "error" and page.console_errors.append(m.text))
    page.on("pageerror", lambda e: page.console_errors.append(str(e)))
    return page


async def shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    await page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


async def seed_long(gw: Gateway) -> dict[str, Any]:
    writer = StoreWriter(gw.deps.engine)
    records = long_run("long-run", 299)
    for start in range(0, len(records), 100):
        writer.write_batch(records[start : start + 100])
    return await gw.trace("long-run")


async def focused_id(page: Any) -> str:
    return str(await page.evaluate("document.activeElement.id"))


async def test_filter_open_trace_and_follow_a_tool_call(browser: Any, gateway: Gateway) -> None:
    runs: Runs = await all_runs(gateway)
    page = await new_page(browser)
    await page.goto(gateway.url + "/")
    await shot(page, "traces-1280")
    await page.select_option("select[name=violation]", "truncated_tool_call")
    await page.get_by_role("button", name="Filter").click()
    await page.wait_for_url("**violation=truncated_tool_call**")
    assert await page.locator("tr[data-id]").count() == 1
    await expect(page.locator("tr[data-id] [data-status]")).to_have_text("failed")
    await page.goto(gateway.url + "/")
    await page.get_by_role("link", name="Weather in Paris and Tokyo?").click()
    await page.wait_for_url(f"**/traces/{runs.weather}")
    await shot(page, "trace-1280")
    assert await page.get_by_role("status").first.inner_text() == (
        "Completed: the last step stopped completed."
    )
    link = page.locator("li.item.k-tool_call", has_text="call_tokyo").locator("a.pair")
    assert (await link.inner_text()).startswith("result ↓ step 2 · ")
    target = (await link.get_attribute("href")).lstrip("#")
    await link.click()
    await page.wait_for_url(f"**#{target}")
    result = page.locator(f"#{target}")
    assert await result.evaluate("el => el.matches(':target')")
    await page.wait_for_function(f"document.activeElement.id === '{target}'")
    assert "rainy" in await result.inner_text()
    await result.locator("a.pair").click()  # and back to the call, which gets the focus
    await page.wait_for_function("document.activeElement.classList.contains('k-tool_call')")
    assert page.console_errors == [] and page.dialogs == []


async def test_a_retry_and_a_refused_request_as_a_user_sees_them(
    browser: Any, gateway: Gateway
) -> None:
    retried, refused = await retry_run(gateway), await refused_run(gateway)
    await gateway.flush()
    page = await new_page(browser)
    await page.goto(f"{gateway.url}/traces/{retried}")
    await shot(page, "trace-retry-1280")
    assert await page.get_by_text("cut off, retried at step 3").is_visible()
    assert await page.get_by_text("retry of step 2").is_visible()
    step4 = page.locator('details.row[data-seq="4"]')
    await step4.get_by_role("link", name="↑ call · step 3").click()
    await page.wait_for_function("document.activeElement.id === 's3-out-0'")
    assert await page.evaluate(FOCUSED_ROW) == await page.locator(
        'details.row[data-seq="3"]'
    ).get_attribute("id")
    await page.goto(f"{gateway.url}/traces/{refused}")
    row = page.locator("details.row.refusal")
    summary = row.locator("summary")
    assert "refused" in await summary.inner_text() and "call_b" in await summary.inner_text()
    await summary.click()  # short traces come opened: this closes it
    assert not await row.evaluate("el => el.open")
    await summary.click()
    assert await row.get_by_text("has no tool result").is_visible()
    await expect(page.locator("[data-status]").first).to_have_text("refused")
    await shot(page, "trace-refused-1280")
    assert page.console_errors == []


async def test_a_web_search_the_provider_ran_as_a_user_sees_it(
    browser: Any, gateway: Gateway
) -> None:
    trace_id = await search_run(gateway)
    await gateway.flush()
    page = await new_page(browser)
    await page.goto(f"{gateway.url}/traces/{trace_id}")
    await shot(page, "trace-provider-search-1280")
    await expect(page.locator("[data-status]").first).to_have_text("completed")
    assert await page.get_by_role("status").first.inner_text() == (
        "Completed: the last step stopped completed."
    )
    call = page.locator("li.item.k-tool_call", has_text=SEARCH_ID)
    await expect(call.locator(".badge.ran")).to_have_text("ran by the provider")
    link = call.locator("a.pair")
    await expect(link).to_have_text("result ↓")
    await link.click()
    await page.wait_for_function("document.activeElement.id === 's1-out-1'")
    result = page.locator("#s1-out-1")
    assert SEARCH_FOUND in await result.inner_text()
    assert await page.get_by_text("never answered").count() == 0
    assert await page.locator("#rows rect:is(.k-tool, .k-open, .k-unanswered)").count() == 0
    assert page.console_errors == [] and page.dialogs == []


async def test_a_long_trace_opens_steps_on_demand_and_moves_by_keys(
    browser: Any, gateway: Gateway
) -> None:
    trace = await seed_long(gateway)
    steps = trace["steps"]
    page = await new_page(browser)
    await page.goto(f"{gateway.url}/traces/long-run")
    await shot(page, "trace-long-1280")
    assert await page.locator(".step-body").count() == 0
    await page.keyboard.press("j")
    assert await page.evaluate(FOCUSED_ROW) == f"step-{steps[0]['id']}"
    await page.keyboard.press("j")
    await page.keyboard.press("j")
    await page.keyboard.press("k")
    assert await page.evaluate(FOCUSED_ROW) == f"step-{steps[1]['id']}"
    flagged = [s for s in steps if any(v["step_id"] == s["id"] for v in trace["violations"])]
    await page.keyboard.press("n")
    assert await page.evaluate(FOCUSED_ROW) == f"step-{flagged[0]['id']}"
    await page.keyboard.press("n")
    assert await page.evaluate(FOCUSED_ROW) == f"step-{flagged[1]['id']}"
    await page.keyboard.press("p")
    assert await page.evaluate(FOCUSED_ROW) == f"step-{flagged[0]['id']}"
    await page.keyboard.press("Enter")  # opens the focused step, which loads its body
    row = page.locator(f"#step-{flagged[0]['id']}")
    await row.locator(".step-body").wait_for()
    assert await row.get_by_text("The stream ended mid-arguments.").first.is_visible()
    retry = steps[flagged[0]["seq"]]
    answer = page.locator(f"#step-{steps[retry['seq']]['id']}")
    await answer.locator("summary").click()
    link = answer.get_by_role("link", name=f"↑ call · step {retry['seq']}").first
    await link.click()  # a call in a step not loaded yet: it opens, loads and takes focus
    await page.wait_for_function(f"document.activeElement.id === 's{retry['seq']}-out-1'")
    assert await page.evaluate(FOCUSED_ROW) == f"step-{retry['id']}"
    assert await page.get_by_text(f"retry of step {flagged[0]['seq']}").first.is_visible()
    await page.keyboard.press("/")
    assert await focused_id(page) == "q"
    await page.keyboard.press("Escape")
    assert page.console_errors == []


async def test_a_long_tool_result_shows_its_head_tail_and_cut(
    browser: Any, gateway: Gateway
) -> None:
    trace = await seed_long(gateway)
    step = next(s for s in trace["steps"] if len(s["input_items"]) == 20)
    page = await new_page(browser)
    await page.goto(f"{gateway.url}/traces/long-run#step-{step['id']}")
    row = page.locator(f"#step-{step['id']}")
    await row.locator(".step-body").wait_for()
    first = row.locator("li.item.k-tool_result").first
    preview = first.locator("details.more > summary")
    assert "collecting tests/test_0.py ... ok" in await preview.inner_text()
    assert "FAILED" in await preview.inner_text()  # the tail, where the error is
    await preview.get_by_text("show all").click()
    assert await first.locator("mark.cut").is_visible()
    assert "characters cut" in await first.locator("mark.cut").inner_text()
    full = first.locator("details.more > div.text")
    assert await full.is_visible() and "KeyError: 'checkout'" in await full.inner_text()
    shown = row.locator("li.item.k-tool_result .text.json:visible").first
    assert (await shown.inner_text()).startswith(('{\n  "', "[\n  {"))  # indented JSON
    await shot(page, "step-long-result-1280")


async def test_a_long_trace_reads_without_javascript(browser: Any, gateway: Gateway) -> None:
    trace = await seed_long(gateway)
    middle = trace["steps"][150]
    page = await new_page(browser, java_script_enabled=False)
    await page.goto(f"{gateway.url}/traces/long-run")
    row = page.locator(f"#step-{middle['id']}")
    await row.locator("summary").click()
    await row.get_by_role("link", name="Open step 151").click()
    await page.wait_for_url(f"**/traces/long-run/steps/{middle['id']}")
    assert await page.get_by_role("heading", name="Step 151").is_visible()
    assert await page.get_by_text(middle["output_items"][0]["text"]).is_visible()
    await page.get_by_role("link", name="Step 152 →").click()
    assert await page.get_by_role("heading", name="Step 152").is_visible()


async def test_a_running_trace_grows_without_a_reload(browser: Any, gateway: Gateway) -> None:
    trace_id = await first_step_only(gateway)
    await gateway.flush()
    page = await new_page(browser)
    await page.goto(f"{gateway.url}/traces/{trace_id}")
    await expect(page.locator("[data-status]").first).to_have_text("running")
    assert "awaiting results" in await page.get_by_role("status").first.inner_text()
    await page.evaluate("window.marker = 'same page'")
    await next_step(gateway, trace_id)
    await gateway.flush()
    await page.locator('details.row[data-seq="2"]').wait_for(timeout=15_000)
    await page.wait_for_function(
        "document.querySelector('[data-status]').textContent === 'completed'"
    )
    assert await page.evaluate("window.marker") == "same page"
    assert await page.locator('details.row[data-seq="1"] rect.k-tool').count() == 1
    assert page.console_errors == []


async def test_no_sideways_scroll_on_a_phone_and_dark_screenshots(
    browser: Any, gateway: Gateway
) -> None:
    runs = await all_runs(gateway)
    long = await seed_long(gateway)
    retried = await retry_run(gateway)
    await gateway.flush()
    pages = {
        "traces": "/",
        "trace": f"/traces/{runs.weather}",
        "trace-retry": f"/traces/{retried}",
        "trace-long": "/traces/long-run",
        "step": f"/traces/long-run/steps/{long['steps'][5]['id']}",
        "violations": "/violations",
        "sessions": "/sessions",
    }
    for scheme in ("light", "dark"):
        page = await new_page(browser, PHONE, color_scheme=scheme)
        for name, path in pages.items():
            await page.goto(gateway.url + path)
            width = await page.evaluate("document.scrollingElement.scrollWidth")
            inner = await page.evaluate("window.innerWidth")
            assert width <= inner, f"{path} scrolls sideways on a phone ({width}px)"
            await shot(page, f"{name}-390{'-dark' if scheme == 'dark' else ''}")
    page = await new_page(browser, WIDE, color_scheme="dark")
    for name in ("traces", "trace-retry", "trace-long", "violations"):
        await page.goto(gateway.url + pages[name])
        await shot(page, f"{name}-dark-1280")


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


async def test_fields_the_store_adds_are_shown_and_escaped(browser: Any, gateway: Gateway) -> None:
    """Session, cost, first user text and refused items, from JSON with HTML in every field,
    served by the gateway's own CSS and script."""
    view = trace_view(hostile_trace(), now=T_JSON + timedelta(hours=1))
    html = (
        make_environment()
        .get_template("trace.html")
        .render(view=view, path="/traces/x", auth_enabled=False)
    )
    page = await new_page(browser)

    async def fulfil(route: Any) -> None:
        headers = {"Content-Security-Policy": CSP, "Content-Type": "text/html; charset=utf-8"}
        await route.fulfill(status=200, body=html, headers=headers)

    await page.route(gateway.url + "/traces/from-json", fulfil)
    await page.goto(gateway.url + "/traces/from-json")
    await asyncio.sleep(0.3)
    assert page.dialogs == [] and await page.locator("img[src=x], b").count() == 0
    assert await page.get_by_text("$0.50", exact=True).first.is_visible()
    assert await page.locator("h1").get_by_text(SCRIPT).is_visible()
    assert await page.locator(".crumbs").get_by_text("session").is_visible()
    refusal = page.locator("details.row.refusal")
    assert await refusal.locator("li.item.k-tool_result").count() == 1
    await shot(page, "trace-store-fields-1280")


async def test_search_from_the_keyboard(browser: Any, gateway: Gateway) -> None:
    await weather_run(gateway)
    await gateway.flush()
    page = await new_page(browser)
    await page.goto(gateway.url + "/violations")
    await page.keyboard.press("/")
    assert await focused_id(page) == "q"
    await page.keyboard.type("ui-wea")
    await page.keyboard.press("Enter")
    await page.wait_for_url("**/traces/ui-weather")
    await page.goto(gateway.url + "/")
    await page.keyboard.press("j")
    assert await page.evaluate("document.activeElement.textContent") == (
        "Weather in Paris and Tokyo?"
    )


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
