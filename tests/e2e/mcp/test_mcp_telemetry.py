"""MCP calls in the metrics and in OTLP: the `execute_tool` span of a joined call carries the
MCP attributes beside the model's call id; an unjoined call is a `tools/call` span."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest

from tests.e2e.mcp.mcp_harness import flush, mcp_gateway, mcp_url  # noqa: F401
from tests.e2e.mcp.test_mcp_agent import agent_loop, mcp_client
from tests.e2e.sinks.test_otlp import exported
from tests.fakes.collector import FakeCollector
from tests.harness import Gateway, GatewayFactory, make_gateway, provider  # noqa: F401

pytestmark = pytest.mark.sqlite  # the MCP side is what varies here


@pytest.fixture
async def collector(aiohttp_server: Any) -> FakeCollector:
    fake = FakeCollector()
    server = await aiohttp_server(fake.app)
    fake.url = str(server.make_url("")).rstrip("/")  # type: ignore[attr-defined]
    return fake


async def metrics_text(gateway: Gateway) -> str:
    async with aiohttp.ClientSession() as session, session.get(f"{gateway.url}/metrics") as r:
        return await r.text()


async def test_calls_are_counted_by_server_tool_and_outcome(
    make_gateway: GatewayFactory, mcp_url: str
) -> None:
    gateway = await mcp_gateway(make_gateway, mcp_url)
    async with mcp_client(gateway) as client:
        await client.list_tools()
        await client.call_tool("read_text_file", {"path": "/a"})
        await client.call_tool("broken", {"reason": "on purpose"})
        await client.call_tool("no_such_tool", {})
    text = await metrics_text(gateway)
    assert (
        'loopwatch_mcp_calls_total{outcome="ok",server="tools",tool="read_text_file"} 1.0' in text
    )
    assert (
        'loopwatch_mcp_calls_total{outcome="tool_error",server="tools",tool="broken"} 1.0' in text
    )
    # A name the server never listed is not a label of its own.
    assert 'tool="no_such_tool"' not in text
    assert 'loopwatch_mcp_call_duration_seconds_count{server="tools"} 3.0' in text


async def test_spans_carry_the_mcp_attributes(
    make_gateway: GatewayFactory, mcp_url: str, collector: FakeCollector
) -> None:
    gateway = await mcp_gateway(
        make_gateway,
        mcp_url,
        otlp_endpoint=collector.url,
        otlp_timeout=2,  # type: ignore[attr-defined]
    )
    await agent_loop(gateway)
    async with mcp_client(gateway) as client:
        await client.call_tool("broken", {"reason": "nobody asked"})
    await asyncio.sleep(0)
    spans = await exported(gateway, collector)
    [tool] = [s for s in spans if s.name.startswith("execute_tool")]
    assert tool.attributes["gen_ai.tool.call.id"] == "call_read1"
    assert tool.attributes["mcp.method.name"] == "tools/call"
    assert tool.attributes["mcp.protocol.version"]
    assert tool.attributes["jsonrpc.request.id"]
    assert "error.type" not in tool.attributes
    [own] = [s for s in spans if s.name == "tools/call broken"]
    assert own.attributes["error.type"] == "tool_error"
    assert own.attributes["gen_ai.tool.name"] == "broken"
    assert "gen_ai.tool.call.id" not in own.attributes
