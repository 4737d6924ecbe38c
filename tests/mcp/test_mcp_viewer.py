"""The trace page shows each tool call's MCP execution (server, duration, outcome, delivery)
and the run's executions that no model call asked for."""

from __future__ import annotations

import aiohttp
import pytest

from tests.harness import GatewayFactory, make_gateway, provider  # noqa: F401
from tests.mcp.mcp_harness import flush, mcp_gateway, mcp_url  # noqa: F401
from tests.mcp.test_mcp_agent import agent_loop, mcp_client

pytestmark = pytest.mark.sqlite  # the MCP side is what varies here


async def test_trace_page_shows_executions(make_gateway: GatewayFactory, mcp_url: str) -> None:
    gateway = await mcp_gateway(make_gateway, mcp_url)
    trace_id = await agent_loop(gateway)
    async with mcp_client(gateway, {"X-Loopwatch-Trace-Id": trace_id}) as client:
        await client.call_tool("broken", {"reason": "<script>x</script>"})
    await flush(gateway)
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"{gateway.url}/traces/{trace_id}") as r,
    ):
        assert r.status == 200
        page = await r.text()
    assert "MCP <code>tools</code> <code>read_text_file</code>" in page
    assert ">delivered<" in page and ">ok<" in page
    assert "Tool executions no model call asked for" in page
    assert "<code>broken</code>" in page and ">tool_error<" in page
    assert "<script>x</script>" not in page
