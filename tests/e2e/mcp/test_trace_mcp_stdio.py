"""`loopwatch mcp-server`: the trace tools over stdio, the store named by --database-url, with
the official MCP SDK's stdio client spawning it as a coding agent would."""

from __future__ import annotations

import sys

import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from tests.e2e.mcp.traces_seed import FAILURE, seed
from tests.harness import GatewayFactory, make_gateway, provider  # noqa: F401

pytestmark = pytest.mark.sqlite  # the command reads the gateway's database file


def command(database_url: str) -> StdioServerParameters:
    args = ["-m", "gateway", "mcp-server", "--database-url", database_url]
    return StdioServerParameters(command=sys.executable, args=args)


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_stdio_server_explains_a_failed_run(
    make_gateway: GatewayFactory, database_url: str, mode: str
) -> None:
    gateway = await make_gateway()
    seeded = await seed(gateway)
    async with Client(command(database_url), mode=mode, cache=None) as client:  # type: ignore[arg-type]
        tools = {tool.name for tool in (await client.list_tools()).tools}
        assert tools == {"list_traces", "get_trace", "search", "list_violations", "explain_run"}
        result = await client.call_tool("explain_run", {"trace_id": seeded.failed})
        text = result.content[0].text  # type: ignore[union-attr]
        assert f"Run {seeded.failed} failed at step 2 of 2" in text and FAILURE in text
        result = await client.call_tool("get_trace", {"trace_id": seeded.failed})
        assert "call call_cfg1 read_file" in result.content[0].text  # type: ignore[union-attr]
        listed = await client.call_tool("list_traces", {"status": "failed", "limit": 5})
        assert [t["id"] for t in listed.structured_content["traces"]] == [seeded.failed]  # type: ignore[index]
        with pytest.raises(MCPError, match="unknown tool"):
            await client.call_tool("nope", {})
