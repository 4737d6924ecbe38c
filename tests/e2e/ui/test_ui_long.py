"""Long runs stay light: rows first, step bodies on demand; step pages; the live feed."""

from __future__ import annotations

import json
import re
from typing import Any

import aiohttp
import pytest

from gateway.store.write.writer import StoreWriter
from tests.e2e.ui.test_ui_pages import fetch
from tests.factories import long_run
from tests.harness import Gateway, gateway, make_gateway, provider  # noqa: F401
from tests.ui.scenarios import first_step_only, next_step


@pytest.fixture
async def long_trace(gateway: Gateway) -> dict[str, Any]:
    writer = StoreWriter(gateway.deps.engine)
    records = long_run("long-run", 299)  # and the cut-off step retried: 300 steps
    for start in range(0, len(records), 100):
        writer.write_batch(records[start : start + 100])
    return await gateway.trace("long-run")


async def test_a_300_step_trace_page_is_small_and_its_bodies_load_on_demand(
    gateway: Gateway, long_trace: dict[str, Any]
) -> None:
    assert len(long_trace["steps"]) == 300
    page = await fetch(gateway, "/traces/long-run")
    assert page.status == 200
    assert len(page.text.encode()) <= 300 * 1024
    assert page.text.count('<details class="row') == 300
    assert page.text.count('class="row-body lazy"') == 300 and " open>" not in page.text
    assert '<li class="item' not in page.text  # no step body is on the first page
    middle = long_trace["steps"][150]
    link = f'<a href="/traces/long-run/steps/{middle["id"]}">Open step 151</a>'
    assert link in page.text  # readable without the script: each step has its own page
    assert "2 tool results" in page.text or "tool result" in page.text  # rows show what's new
    body = await fetch(gateway, f"/traces/long-run/steps/{middle['id']}", part="body")
    assert body.status == 200 and body.text.startswith('<div class="step-body"')
    assert "<html" not in body.text and body.headers["Content-Security-Policy"]
    assert f'data-copy="{middle["provider_request_id"]}"' in body.text


async def test_cross_step_links_of_a_long_trace_point_at_step_pages(
    gateway: Gateway, long_trace: dict[str, Any]
) -> None:
    steps = long_trace["steps"]
    retry = next(s for s in steps if s["stop_reason"] == "interrupted")
    answered = steps[retry["seq"]]  # the retry, whose call step seq + 2 answers
    answer = steps[retry["seq"] + 1]
    body = (await fetch(gateway, f"/traces/long-run/steps/{answer['id']}", part="body")).text
    target = f"/traces/long-run/steps/{answered['id']}#s{answered['seq']}-out-1"
    assert f'href="{target}" data-step="{answered["id"]}">↑ call · step {answered["seq"]}' in body
    page = await fetch(gateway, f"/traces/long-run/steps/{answered['id']}")
    assert page.status == 200 and f"Step {answered['seq']}" in page.text
    assert 'rel="prev"' in page.text and 'rel="next"' in page.text
    assert "retry of step" in page.text
    assert f'href="/traces/long-run#step-{answered["id"]}">All steps</a>' in page.text


async def test_a_huge_tool_result_keeps_its_tail(
    gateway: Gateway, long_trace: dict[str, Any]
) -> None:
    step = next(s for s in long_trace["steps"] if len(s["input_items"]) == 20)
    big = step["input_items"][0]
    assert big["attrs"]["text_length"] > 350_000 and len(big["text"]) <= 16_384
    body = (await fetch(gateway, f"/traces/long-run/steps/{step['id']}", part="body")).text
    assert re.search(r'<mark class="cut">\[… [\d,]+ characters cut …\]</mark>', body)
    assert "KeyError: &#39;checkout&#39;" in body and "stored cut: " in body


async def test_unknown_steps_and_traces_are_404_pages(
    gateway: Gateway, long_trace: dict[str, Any]
) -> None:
    for path in ("/traces/long-run/steps/nope", "/traces/nope/steps/nope"):
        page = await fetch(gateway, path)
        assert page.status == 404 and page.headers["Content-Type"].startswith("text/html")
    assert (await fetch(gateway, "/traces/nope/live")).status == 404


async def live(gw: Gateway, trace_id: str, **params: str) -> dict[str, Any]:
    await gw.flush()
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{gw.url}/traces/{trace_id}/live", params=params) as response,
    ):
        assert response.status == 200
        result: dict[str, Any] = json.loads(await response.text())
        return result


async def test_a_running_trace_feeds_its_new_steps(gateway: Gateway) -> None:
    trace_id = await first_step_only(gateway)
    page = await fetch(gateway, f"/traces/{trace_id}")
    assert (
        'data-status="running"' in page.text and 'data-live="/traces/ui-running/live"' in page.text
    )
    known = re.search(r'data-known="([^"]+)"', page.text)[1]  # type: ignore[index]
    assert await live(gateway, trace_id, after="1", known=known) == {"changed": False}
    await next_step(gateway, trace_id)
    fed = await live(gateway, trace_id, after="1", known=known)
    assert fed["changed"] and fed["after"] == 2 and not fed["running"]
    ids = [row["id"] for row in fed["rows"]]
    trace = await gateway.trace(trace_id)
    assert ids == [f"step-{s['id']}" for s in trace["steps"]]  # the new row, and step 1 whose
    assert "k-tool" in fed["rows"][0]["html"]  # call the new step answered
    assert 'data-status="completed"' in fed["top"] and fed["span"] > 0
    done = await fetch(gateway, f"/traces/{trace_id}")
    # The steps' length follows the page's Duration, and the rows' view box holds every bar.
    assert f"<dt>Duration</dt><dd>{fed['elapsed']}</dd>" in fed["top"]
    assert f'<span id="steps-elapsed">{fed["elapsed"]}</span>' in done.text
    assert f'viewBox="0 0 {fed["span"]} 10"' in done.text
    # A completed chat can get another turn: its page still follows, at a slower pace.
    assert 'data-live="/traces/ui-running/live"' in done.text
    assert 'data-running="false"' in done.text and 'data-shown-status="completed"' in done.text
    assert await live(gateway, trace_id, after="2", known=fed["known"], status="completed") == {
        "changed": False
    }
    shown_before = await live(gateway, trace_id, after="2", known=fed["known"], status="running")
    assert shown_before["changed"] and shown_before["status"] == "completed"
