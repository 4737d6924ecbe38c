"""The trace page shows each tool call's MCP execution (server, duration, outcome, delivery)
and the run's executions that no model call asked for; an observed MCP violation is listed,
filtered and counted with the run's, never shown as a refusal, and links to its execution;
executions that joined no run have a page of their own."""

from __future__ import annotations

import re
from typing import Any

import aiohttp
import pytest

from gateway.ui.pages.rendering import make_environment
from gateway.ui.views.present import trace_view
from tests.e2e.mcp.mcp_harness import flush, mcp_gateway, mcp_url  # noqa: F401
from tests.e2e.mcp.test_mcp_agent import agent_loop, mcp_client
from tests.factories import T_JSON, item_dict, step_dict, trace_dict, violation_dict
from tests.harness import Gateway, GatewayFactory, make_gateway, provider  # noqa: F401

pytestmark = pytest.mark.sqlite  # the MCP side is what varies here

UNREQUESTED = "unrequested_tool_execution"


async def page(gateway: Gateway, path: str) -> str:
    async with aiohttp.ClientSession() as http, http.get(f"{gateway.url}{path}") as r:
        assert r.status == 200, path
        return await r.text()


def dangling(html: str) -> list[str]:
    """The page's links to an anchor of its own that it does not have."""
    ids = set(re.findall(r'\bid="([^"]+)"', html))
    return [target for target in re.findall(r'href="#([^"]+)"', html) if target not in ids]


async def test_trace_page_shows_executions(make_gateway: GatewayFactory, mcp_url: str) -> None:
    gateway = await mcp_gateway(make_gateway, mcp_url)
    trace_id = await agent_loop(gateway)
    async with mcp_client(gateway, {"X-Loopwatch-Trace-Id": trace_id}) as client:
        await client.call_tool("broken", {"reason": "<script>x</script>"})
    await flush(gateway)
    html = await page(gateway, f"/traces/{trace_id}")
    assert "MCP <code>tools</code> <code>read_text_file</code>" in html
    assert ">delivered<" in html and ">ok<" in html
    assert "Tool executions no model call asked for" in html
    assert "<code>broken</code>" in html and ">tool_error<" in html
    assert "<script>x</script>" not in html


async def _observed_on_a_run(gateway: Gateway) -> tuple[str, str]:
    """A run, and an MCP call named on it that none of its model calls asked for (observed:
    it reaches the server). Its trace id and the execution's id."""
    trace_id = await agent_loop(gateway)
    async with mcp_client(gateway, {"X-Loopwatch-Trace-Id": trace_id}) as client:
        await client.call_tool("read_text_file", {"path": "/srv/other.txt"})
    await flush(gateway)
    [loose] = [e for e in (await gateway.trace(trace_id))["tool_executions"] if not e["call_id"]]
    return trace_id, str(loose["id"])


async def test_an_observed_mcp_violation_is_in_the_list_its_filter_and_counts(
    make_gateway: GatewayFactory, mcp_url: str
) -> None:
    gateway = await mcp_gateway(make_gateway, mcp_url)
    trace_id, _ = await _observed_on_a_run(gateway)
    [listed] = await gateway.traces(violation=UNREQUESTED)
    assert (listed["id"], listed["violation_count"]) == (trace_id, 1)
    assert await gateway.traces(violation="undeclared_tool") == []
    rows = await page(gateway, f"/?violation={UNREQUESTED}")
    assert f'data-id="{trace_id}"' in rows
    badge = f'title="{UNREQUESTED}">unrequested tool execution</span>'
    assert badge in rows  # its badge, not "none"
    everything = await page(gateway, "/")
    assert f'href="/?violation={UNREQUESTED}"' in everything
    assert '<span class="muted">none</span>' not in everything


async def test_an_observed_mcp_violation_is_no_refusal_and_links_to_its_execution(
    make_gateway: GatewayFactory, mcp_url: str
) -> None:
    gateway = await mcp_gateway(make_gateway, mcp_url)
    trace_id, execution_id = await _observed_on_a_run(gateway)
    trace_page = await page(gateway, f"/traces/{trace_id}")
    assert "refused request" not in trace_page
    assert f'<a href="#mcp-{execution_id}">MCP <code>tools</code>' in trace_page
    assert f'id="mcp-{execution_id}"' in trace_page
    assert dangling(trace_page) == []
    assert trace_page.count("unrequested tool execution") == 2  # listed, and on its execution
    violations = await page(gateway, f"/violations?kind={UNREQUESTED}")
    assert "refused request" not in violations and ">observed<" in violations
    assert f'href="/traces/{trace_id}#mcp-{execution_id}"' in violations


async def test_executions_of_no_run_are_paged_with_their_violations(
    make_gateway: GatewayFactory, mcp_url: str
) -> None:
    gateway = await mcp_gateway(make_gateway, mcp_url)
    async with mcp_client(gateway) as client:  # no run named, no model call asked
        for path in ("/a", "/b", "/c"):
            await client.call_tool("read_text_file", {"path": path})
    await flush(gateway)
    seen, cursor = [], ""
    while True:
        params = {"limit": "2", **({"cursor": cursor} if cursor else {})}
        found = await gateway.get("/api/mcp/executions", params=params)
        seen += found["executions"]
        if not found["next_cursor"]:
            break
        cursor = found["next_cursor"]
    assert len(seen) == len({e["id"] for e in seen}) == 3
    assert all(e["violation_kinds"] == [UNREQUESTED] and e["escaped"] for e in seen)
    oldest = seen[-1]["id"]
    violations = await page(gateway, "/violations")
    assert 'href="/violations/unjoined"' in violations
    link = f'href="/violations/unjoined?at={oldest}#mcp-{oldest}"'
    assert link in violations
    unjoined = await page(gateway, f"/violations/unjoined?at={oldest}")
    assert f'<tr id="mcp-{oldest}">' in unjoined
    assert "<code>tools</code>" in unjoined and "<code>read_text_file</code>" in unjoined
    assert ">ok<" in unjoined and ">escaped<" in unjoined
    assert "unrequested tool execution" in unjoined
    assert unjoined.count("<tr id=") == 1  # from that execution on: the oldest


def _trace_with_an_execution() -> dict[str, Any]:
    """Read-API JSON: a run whose second step's tool call ran on MCP with a violation."""
    execution = {
        "id": "ex-1",
        "call_id": "c1",
        "trace_id": "tr-json",
        "join": "content",
        "server": "tools",
        "tool": "read_text_file",
        "outcome": "ok",
        "duration_ms": 3.0,
        "delivery": None,
        "error": None,
        "violation_kinds": ["invalid_tool_arguments"],
    }
    call = item_dict("tool_call", call_id="c1", tool_name="read_text_file", arguments="{}")
    call["executions"] = [execution]
    steps = [
        step_dict(1, at_ms=0, inputs=[item_dict("user", role="user", text="go")]),
        step_dict(2, at_ms=2000, outputs=[call]),
        step_dict(3, at_ms=4000, stop="completed"),
    ]
    violation = violation_dict(
        "invalid_tool_arguments",
        step_id=None,
        at_ms=2500,
        enforced=False,
        source="mcp",
        server="tools",
        tool="read_text_file",
        execution_id="ex-1",
    )
    return trace_dict(steps, [violation], refusals=[], tool_executions=[execution])


@pytest.mark.parametrize("lazy_after", [40, 1])
def test_a_violation_links_to_its_execution_whether_step_bodies_load_later_or_not(
    lazy_after: int,
) -> None:
    view = trace_view(_trace_with_an_execution(), now=T_JSON, lazy_after=lazy_after)
    html = (
        make_environment()
        .get_template("trace.html")
        .render(view=view, path="/traces/tr-json", auth_enabled=False)
    )
    assert '<a href="#mcp-ex-1">MCP <code>tools</code>' in html
    assert "refused" not in html.split('id="violations"')[1].split("</section>")[0]
    if view.lazy:  # the row holding it says so: the page's script opens it and loads it
        assert 'data-seq="2" data-mcp="ex-1"' in html
    else:
        assert dangling(html) == []
        assert 'id="mcp-ex-1"' in html
