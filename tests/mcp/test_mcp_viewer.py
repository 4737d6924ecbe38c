"""The trace page shows each tool call's MCP execution (server, duration, outcome, delivery)
and the run's executions that no model call asked for; an observed MCP violation is listed,
filtered and counted with the run's, never shown as a refusal, and links to its execution;
executions that joined no run have a page of their own."""

from __future__ import annotations

import re

import aiohttp
import pytest

from tests.harness import Gateway, GatewayFactory, make_gateway, provider  # noqa: F401
from tests.mcp.mcp_harness import flush, mcp_gateway, mcp_url  # noqa: F401
from tests.mcp.test_mcp_agent import agent_loop, mcp_client

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
