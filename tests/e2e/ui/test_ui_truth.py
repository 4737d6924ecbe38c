"""One truth in the browser: the demo's runs show the same status and cost in the read API,
the list, each trace page and the metrics; sessions the same cost in the API and their page;
each step's declared tools and parameters beside it, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from gateway.ui.views.fmt import money
from tests.conftest import Database
from tests.e2e.ui.test_ui_browser import CHROMIUM, browser, expect, new_page  # noqa: F401
from tests.factories import chat_request
from tests.fakes.chat import completion
from tests.harness import GatewayFactory, make_gateway, provider  # noqa: F401

ROOT = Path(__file__).resolve().parents[3]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="Debian chromium missing: apt-get install chromium"
    ),
]


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[str]:
    """`loopwatch demo` serving after its sample runs; yields its viewer's URL."""
    command = [sys.executable, "-m", "gateway", "demo", "--port", "0"]
    database = f"sqlite:///{tmp_path}/demo.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPWATCH_")}
    process = subprocess.Popen(
        [*command, "--database-url", database],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        url = ""
        for line in process.stdout:
            found = re.search(r"Open the trace viewer: (\S+)/", line)
            url = found[1] if found else url
            if "Serving until Ctrl-C" in line:
                break
        assert url, "the demo printed no viewer URL"
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)
        if process.stdout is not None:
            process.stdout.close()


async def fetch(url: str) -> Any:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        assert response.status == 200
        if response.content_type == "application/json":
            return await response.json()
        return await response.text()


async def settled(url: str) -> list[dict[str, Any]]:
    """The demo's traces once none is inside its idle window (2 s) any more."""
    deadline = time.monotonic() + 30
    while True:
        traces: list[dict[str, Any]] = (await fetch(f"{url}/api/traces?limit=50"))["traces"]
        if all(t["status"] != "running" for t in traces) or time.monotonic() > deadline:
            return traces
        await asyncio.sleep(0.5)


def metric_sum(text: str, name: str) -> float:
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name + "{") or line.startswith(name + " ")
    )


async def test_every_surface_shows_the_demo_runs_alike(browser: Any, demo: str) -> None:
    traces = await settled(demo)
    assert len(traces) >= 5
    assert "abandoned" in {t["status"] for t in traces}
    page = await new_page(browser)
    await page.goto(f"{demo}/")
    for trace in traces:
        row = page.locator(f'tr[data-id="{trace["id"]}"]')
        await expect(row.locator("[data-status]")).to_have_attribute("data-status", trace["status"])
        await expect(row.locator('td[data-label="Cost"]')).to_have_text(money(trace["cost_usd"]))
    for trace in traces:
        await page.goto(f"{demo}/traces/{trace['id']}")
        top = page.locator("#trace-top")
        await expect(top.locator("[data-status]").first).to_have_attribute(
            "data-status", trace["status"]
        )
        cost = top.locator("dt", has_text="Cost").locator("xpath=following-sibling::dd")
        assert (await cost.inner_text()).split(" ")[0] == money(trace["cost_usd"])
        detail = await fetch(f"{demo}/api/traces/{trace['id']}")
        assert (detail["status"], detail["cost_usd"]) == (trace["status"], trace["cost_usd"])
        if trace["status"] == "refused":  # its tool results answer calls step 1 holds
            refused = page.locator("details.refusal")
            await expect(refused.locator("a.pair").first).to_have_text(re.compile("call · step"))
            assert "no call recorded" not in await refused.first.inner_text()
        if trace["status"] == "abandoned":  # the page reads the same idle window as the list
            assert "live" not in await top.locator("[data-live-badge]").all_inner_texts()
            assert "Abandoned" in await top.inner_text()
    metrics = await fetch(f"{demo}/metrics")
    # The list shows roots; the metric counts every run, sub-agents' too: the trees' totals.
    total = sum(t["tree"]["cost"] or 0.0 for t in traces)
    assert metric_sum(metrics, "loopwatch_cost_usd_total") == pytest.approx(total, rel=1e-6)
    abandoned = sum(t["status"] == "abandoned" for t in traces)
    assert metric_sum(metrics, "loopwatch_traces_abandoned_total") == abandoned
    assert page.console_errors == []


async def test_the_demo_shows_each_steps_tools_and_parameters(browser: Any, demo: str) -> None:
    traces = await settled(demo)
    chat = next(t for t in traces if t["status"] == "completed" and t["step_count"] >= 3)
    detail = await fetch(f"{demo}/api/traces/{chat['id']}")
    step = detail["steps"][0]
    assert step["tools"] and step["params"]["model"] == step["model"]
    names = [tool.get("function", tool).get("name") for tool in step["tools"]]
    page = await new_page(browser)
    await page.goto(f"{demo}/traces/{chat['id']}")
    request = page.locator(f"#step-{step['id']} details.request")
    for name in names:
        await expect(request.locator("code.tool-name", has_text=name).first).to_be_visible()
    await expect(request.locator(".params dt", has_text="model")).to_be_visible()
    await request.locator("a[data-raw-link]").click()
    raw = json.loads(await page.locator('pre[data-raw="request"]').inner_text())
    assert raw["tools"] == step["tools"] and raw["params"] == step["params"]
    response = json.loads(await page.locator('pre[data-raw="response"]').inner_text())
    assert response["output_items"] == step["output_items"]
    assert page.console_errors == []


async def test_sessions_cost_and_tools_on_both_databases(
    browser: Any, make_gateway: GatewayFactory, database: Database
) -> None:
    gw = await make_gateway(database_url=database.url)
    tools = [
        {
            "type": "function",
            "function": {
                "name": "lookup_<b>order</b>",
                "description": "Finds an order <script>alert(1)</script>",
                "parameters": {"type": "object", "properties": {"id": {"type": "string"}}},
            },
        }
    ]
    body = chat_request(
        "where is my order?",
        tools=tools,
        temperature=0.1,
        reasoning_effort="low",
    )
    headers = {"X-Loopwatch-Session-Id": "sess-truth"}
    trace_ids = []
    async with aiohttp.ClientSession() as session:
        for _ in range(2):
            gw.provider.queue(completion("It ships today."))
            async with session.post(
                gw.openai_base + "/chat/completions", json=body, headers=headers
            ) as response:
                assert response.status == 200
                trace_ids.append(response.headers["X-Loopwatch-Trace-Id"])
    api = await gw.get("/api/sessions")
    (listed,) = api["sessions"]
    assert listed["cost_usd"] and listed["trace_count"] == len(set(trace_ids))
    page = await new_page(browser)
    await page.goto(f"{gw.url}/sessions")
    row = page.locator('tr[data-id="sess-truth"]')
    await expect(row.locator('td[data-label="Cost"]')).to_have_text(money(listed["cost_usd"]))
    trace = await gw.trace(trace_ids[0])
    step = trace["steps"][0]
    assert step["params"]["temperature"] == 0.1 and step["tools"] == tools
    await page.goto(f"{gw.url}/traces/{trace_ids[0]}")
    request = page.locator(f"#step-{step['id']} details.request")
    await expect(request.locator("code.tool-name")).to_have_text("lookup_<b>order</b>")
    await expect(request.locator(".tool-description")).to_have_text(
        "Finds an order <script>alert(1)</script>"
    )
    await expect(request.locator(".params dt", has_text="reasoning_effort")).to_be_visible()
    assert page.dialogs == [] and page.console_errors == []
