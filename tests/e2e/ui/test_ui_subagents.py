"""Sub-agents on the pages: the parent's call shows the run it started and links to it, the
run links up to its parent (breadcrumbs through every run above it), the list shows roots
with their tree's totals; every id and text escaped."""

from __future__ import annotations

import pytest
from markupsafe import escape

from tests.e2e.ui.test_ui_pages import fetch, row_ids
from tests.fakes.chat import call, completion
from tests.harness import Gateway, gateway, make_gateway, provider  # noqa: F401
from tests.traffic import post

pytestmark = pytest.mark.sqlite
HOSTILE = 'x"><script>alert(1)</script>'


def chat_body(text: str) -> dict[str, object]:
    return {"model": "gpt-4o", "messages": [{"role": "user", "content": text}]}


async def test_a_tree_of_runs_on_the_pages(gateway: Gateway) -> None:
    gateway.provider.queue(
        completion(tool_calls=[call("call_one", "Agent", {"prompt": "x"})]),
        completion(tool_calls=[call("call_two", "Agent", {"prompt": "y"})]),
        completion("deepest answer"),
    )
    root, middle = "root-run", "mid-run"
    assert await post(gateway, chat_body("start"), **{"X-Loopwatch-Trace-Id": root}) == 200
    linked = {"X-Loopwatch-Parent-Trace-Id": root, "X-Loopwatch-Parent-Call-Id": "call_one"}
    linked["X-Loopwatch-Trace-Id"] = middle
    assert await post(gateway, chat_body("middle task"), **linked) == 200
    # A call id is the client's string: shown escaped wherever it appears.
    deeper = {"X-Loopwatch-Parent-Trace-Id": middle, "X-Loopwatch-Parent-Call-Id": HOSTILE}
    deeper["X-Loopwatch-Trace-Id"] = "leaf-run"
    assert await post(gateway, chat_body("leaf task"), **deeper) == 200

    parent_page = await fetch(gateway, f"/traces/{root}")
    assert parent_page.status == 200
    # Under the call that started it: the run, linked, with its status, steps, cost, time.
    inline = f'<p class="small subagent">sub-agent run <a href="/traces/{middle}">{middle}</a>'
    assert inline in parent_page.text
    assert "1 step ·" in parent_page.text.split(inline, 1)[1].split("</p>", 1)[0]
    assert "Whole tree" in parent_page.text and "3 runs" in parent_page.text

    middle_page = await fetch(gateway, f"/traces/{middle}")
    assert str(escape(HOSTILE)) in middle_page.text and HOSTILE not in middle_page.text
    leaf = await fetch(gateway, "/traces/leaf-run")
    assert "A sub-agent run, started by the call" in leaf.text and "depth 2" in leaf.text
    crumbs = leaf.text.split('class="crumbs"', 1)[1].split("</p>", 1)[0]
    assert crumbs.index(f'href="/traces/{root}"') < crumbs.index(f'href="/traces/{middle}"')

    listed = await fetch(gateway, "/")
    assert row_ids(listed) == [root]
    assert "with 2 sub-agent runs" in listed.text
    assert HOSTILE not in listed.text + parent_page.text + leaf.text
    assert str(escape(HOSTILE)) in leaf.text


async def test_the_list_shows_sub_agent_runs_when_asked(gateway: Gateway) -> None:
    gateway.provider.responder = lambda _: completion("ok")
    assert await post(gateway, chat_body("start"), **{"X-Loopwatch-Trace-Id": "top"}) == 200
    linked = {"X-Loopwatch-Trace-Id": "under", "X-Loopwatch-Parent-Trace-Id": "top"}
    assert await post(gateway, chat_body("sub task"), **linked) == 200
    assert row_ids(await fetch(gateway, "/")) == ["top"]
    every = await fetch(gateway, "/", children="1")
    assert sorted(row_ids(every)) == ["top", "under"]
    assert 'sub-agent of <a href="/traces/top">top</a>' in every.text
