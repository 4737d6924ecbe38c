"""`loopwatch mcp-stdio`: a stdio MCP server behind the bridge, driven by the official SDK's
stdio client; lines pass unchanged and each tool call is recorded and joined as over HTTP."""

from __future__ import annotations

import sys

import pytest
from mcp import Client, StdioServerParameters

from gateway.app import DEPS
from gateway.proxy.mcp.runtime import McpSink
from gateway.store.read import mcp as reads
from tests.e2e.mcp.mcp_harness import ROOT, flush
from tests.e2e.mcp.test_mcp_agent import TOOLS, openai_client
from tests.fakes.chat import call, completion
from tests.harness import Gateway, GatewayFactory, make_gateway, provider  # noqa: F401

pytestmark = pytest.mark.sqlite  # the MCP side is what varies here


def bridged(gateway: Gateway, **env: str) -> Client:
    server = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "gateway",
            "mcp-stdio",
            "--gateway",
            gateway.url,
            "--name",
            "local",
            "--",
            sys.executable,
            "-m",
            "tests.e2e.mcp.mcp_server",
            "stdio",
        ],
        cwd=str(ROOT),
        env=env or None,
    )
    return Client(server, mode="legacy", cache=None)


async def test_a_stdio_tool_call_is_recorded_joined_and_delivered(
    make_gateway: GatewayFactory,
) -> None:
    gateway = await make_gateway()
    # No MCP server configured: model steps cost the MCP side nothing, joins go by the store.
    assert not [sink for sink in gateway.app[DEPS].sinks if isinstance(sink, McpSink)]
    gateway.provider.queue(
        completion(tool_calls=[call("call_s1", "local__weather", {"city": "Oslo"})]),
        completion("It is mild in Oslo."),
    )
    sdk = openai_client(gateway)
    messages: list[object] = [{"role": "user", "content": "Weather in Oslo?"}]
    raw = await sdk.chat.completions.with_raw_response.create(
        model="gpt-4o",
        messages=messages,
        tools=TOOLS,  # type: ignore[arg-type]
    )
    trace_id = raw.headers["X-Loopwatch-Trace-Id"]
    message = raw.parse().choices[0].message
    async with bridged(gateway) as client:
        tools = await client.list_tools()
        result = await client.call_tool("weather", {"city": "Oslo"})
    assert "weather" in {t.name for t in tools.tools}
    assert result.structured_content == {"city": "Oslo", "celsius": 21.5}
    text = result.content[0].text  # type: ignore[union-attr]
    messages += [
        message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": "call_s1", "content": text},
    ]
    await sdk.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS)  # type: ignore[arg-type]
    await flush(gateway)
    [execution] = (await gateway.trace(trace_id))["tool_executions"]
    assert (execution["server"], execution["tool"], execution["call_id"]) == (
        "local",
        "weather",
        "call_s1",
    )
    assert execution["join"] == "content" and execution["delivery"] == "delivered"
    assert execution["result"]["structuredContent"] == {"city": "Oslo", "celsius": 21.5}
    assert execution["protocol_version"] is not None
    servers = (await gateway.get("/api/mcp/servers"))["servers"]
    assert [(s["name"], s["calls"]) for s in servers] == [("local", 1)]


async def test_the_bridge_names_the_run_from_its_environment(
    make_gateway: GatewayFactory,
) -> None:
    gateway = await make_gateway()
    async with bridged(gateway, LOOPWATCH_TRACE_ID="run-from-env") as client:
        await client.call_tool("read_text_file", {"path": "/x"})
    await flush(gateway)
    assert (await gateway.get("/api/mcp/executions"))["executions"] == []
    [joined] = reads.trace_executions(gateway.deps.engine, "run-from-env")
    assert (joined["join"], joined["tool"], joined["call_id"]) == ("header", "read_text_file", None)
