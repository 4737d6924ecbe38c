"""The fork form as a user drives it in Debian's chromium: open a step, fork it with another
model, land on the fork's page with the original step beside the fork's."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.ui.test_cassette import chat_loop
from tests.e2e.ui.test_ui_browser import CHROMIUM, browser, new_page, shot  # noqa: F401
from tests.fakes.chat import completion, usage
from tests.harness import Gateway, gateway, make_gateway, provider  # noqa: F401

pytestmark = [
    pytest.mark.browser,
    pytest.mark.sqlite,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="Debian chromium missing: apt-get install chromium"
    ),
]


async def test_a_step_is_forked_from_its_form(browser: Any, gateway: Gateway) -> None:
    await chat_loop(gateway, stream=False)
    [trace] = await gateway.traces()
    gateway.provider.queue(completion("Forked: Rome is <i>rainy</i>.", use=usage(80, 6)))
    page = await new_page(browser)
    await page.goto(f"{gateway.url}/traces/{trace['id']}")
    row = page.locator("details.row[data-seq='2']")
    await row.evaluate("el => { el.open = true; }")
    form_box = row.locator("details.fork")
    await form_box.locator("summary").click()
    await form_box.locator("input[name=model]").fill("gpt-4o-mini")
    await form_box.locator("textarea[name=params]").fill('{"temperature": 0}')
    await form_box.get_by_role("button", name="Fork step 2").click()
    await page.wait_for_url(lambda url: "/traces/tr-" in url and trace["id"] not in url)
    compare = page.locator("section.fork-compare")
    await compare.wait_for()
    text = await compare.inner_text()
    assert "Fork of step 2" in text and "original" in text.lower()
    assert "get_weather" in text and "Rome" in text  # the original step's call
    assert "Forked: Rome is <i>rainy</i>." in text  # shown as text, not markup
    await shot(page, "fork-1280")
    sent = gateway.provider.received[-1].json()
    assert (sent["model"], sent["temperature"]) == ("gpt-4o-mini", 0)
    assert page.console_errors == [] and page.dialogs == []
