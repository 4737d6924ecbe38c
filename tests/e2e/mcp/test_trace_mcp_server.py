"""The trace MCP server (`/api/mcp/traces`) with the official MCP SDK as client, both protocol
generations: a developer's agent lists runs, reads one, and learns why it failed."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.e2e.mcp.traces_seed import FAILURE, TOOL_ERROR, seed
from tests.harness import Gateway, GatewayFactory, make_gateway, provider  # noqa: F401

PATH = "/api/mcp/traces"
LEGACY, MODERN = "legacy", "2026-07-28"
TOKEN = "trace-mcp-admin-token-0123456789"
TOOLS = {"list_traces", "get_trace", "search", "list_violations", "explain_run"}


@contextlib.asynccontextmanager
async def traces_client(
    gateway: Gateway, mode: str = LEGACY, headers: dict[str, str] | None = None
) -> AsyncIterator[Client]:
    async with httpx2.AsyncClient(headers=headers or {}, timeout=30) as http:
        transport = streamable_http_client(gateway.url + PATH, http_client=http)
        async with Client(transport, mode=mode, cache=None) as client:  # type: ignore[arg-type]
            yield client


async def text_of(client: Client, tool: str, arguments: dict[str, Any]) -> tuple[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert result.is_error is False, result.content
    return result.content[0].text, result.structured_content  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", [LEGACY, MODERN])
async def test_an_agent_learns_why_the_run_failed(make_gateway: GatewayFactory, mode: str) -> None:
    gateway = await make_gateway()
    seeded = await seed(gateway)
    async with traces_client(gateway, mode) as client:
        assert (client.protocol_version == MODERN) is (mode == MODERN)
        listed = (await client.list_tools()).tools
        assert {tool.name for tool in listed} == TOOLS
        assert all(tool.description and tool.input_schema["type"] == "object" for tool in listed)
        text, structured = await text_of(client, "list_traces", {"status": "failed"})
        assert [t["id"] for t in structured["traces"]] == [seeded.failed]
        assert seeded.failed in text and "Deploy the service" in text
        text, structured = await text_of(client, "explain_run", {"trace_id": seeded.failed})
        assert f"Run {seeded.failed} failed at step 2 of 2" in text
        assert FAILURE in text and "undeclared_tool at step 1 (call call_cfg1)" in text
        assert structured["status"] == "failed"
        text, structured = await text_of(client, "get_trace", {"trace_id": seeded.failed})
        assert "Step 2 · gpt-4o · stop error" in text and FAILURE in text
        assert "call call_cfg1 read_file" in text and TOOL_ERROR in text
        [first, second] = structured["steps"]
        assert first["tool_calls"][0]["result"] == TOOL_ERROR
        assert second["http_status"] == 500 and structured["note"] is None


async def test_search_and_violations_find_the_runs(make_gateway: GatewayFactory) -> None:
    gateway = await make_gateway()
    seeded = await seed(gateway)
    async with traces_client(gateway) as client:
        _, found = await text_of(client, "search", {"query": "config.yaml"})
        assert [t["id"] for t in found["traces"]] == [seeded.failed]
        step_id = (await gateway.trace(seeded.failed))["steps"][1]["id"]
        text, found = await text_of(client, "search", {"query": step_id})
        assert text.startswith(f"{step_id} is step 2 of run {seeded.failed}.")
        assert found["step"]["trace_id"] == seeded.failed
        text, found = await text_of(client, "list_violations", {"kind": "orphan_tool_result"})
        assert [v["trace_id"] for v in found["violations"]] == [seeded.orphan]
        assert "call_nobody" in text
        text, found = await text_of(client, "list_violations", {"trace_id": seeded.failed})
        assert [(v["trace_id"], v["kind"]) for v in found["violations"]] == [
            (seeded.failed, "undeclared_tool")
        ]
        text, found = await text_of(client, "list_violations", {"trace_id": seeded.completed})
        assert text == "No violations recorded." and found["violations"] == []
        arguments = {"trace_id": seeded.failed, "from_step": 2}
        text, read = await text_of(client, "get_trace", arguments)
        assert [step["step"] for step in read["steps"]] == [2] and read["violations"] == []
        assert "Step 1 " not in text and "undeclared_tool" not in text and FAILURE in text
        _, newest = await text_of(client, "list_traces", {"limit": 1})
        text, explained = await text_of(client, "explain_run", {})  # the latest run
        assert explained["trace_id"] == newest["traces"][0]["id"]
        text, _ = await text_of(client, "explain_run", {"trace_id": seeded.orphan})
        assert f"Run {seeded.orphan} was refused by the gateway before any step" in text
        assert "orphan_tool_result (call call_nobody)" in text
        text, _ = await text_of(client, "explain_run", {"trace_id": seeded.completed})
        assert "completed at step 2 of 2" in text and "no violations recorded" in text
        _, listed = await text_of(client, "list_traces", {"violation": "orphan_tool_result"})
        assert [t["id"] for t in listed["traces"]] == [seeded.orphan]


@pytest.mark.sqlite
async def test_unknown_tools_bad_arguments_and_unknown_runs(make_gateway: GatewayFactory) -> None:
    gateway = await make_gateway()
    async with traces_client(gateway) as client:
        with pytest.raises(MCPError, match="unknown tool: drop_tables") as caught:
            await client.call_tool("drop_tables", {})
        assert caught.value.error.code == -32602
        for arguments, fault in (
            ({}, "missing required argument 'trace_id'"),
            ({"trace_id": "x", "max_chars": "many"}, "'max_chars' must be a integer"),
            ({"trace_id": "x", "verbose": True}, "unknown argument 'verbose'"),
        ):
            with pytest.raises(MCPError, match=fault):
                await client.call_tool("get_trace", arguments)
        with pytest.raises(MCPError, match="must be one of"):
            await client.call_tool("list_traces", {"status": "exploded"})
        with pytest.raises(MCPError, match="RFC 3339"):
            await client.call_tool("list_traces", {"since": "yesterday"})
        result = await client.call_tool("get_trace", {"trace_id": "tr-nope"})
        assert result.is_error and result.content[0].text == "no trace tr-nope"  # type: ignore[union-attr]
        result = await client.call_tool("explain_run", {})
        assert result.is_error and "no run yet" in result.content[0].text  # type: ignore[union-attr]


async def post(gateway: Gateway, body: Any, **headers: str) -> tuple[int, str, str]:
    async with (
        aiohttp.ClientSession() as session,
        session.post(gateway.url + PATH, data=body, headers=headers) as r,
    ):
        return r.status, r.headers.get("Content-Type", ""), await r.text()


@pytest.mark.sqlite
async def test_the_wire_answers_json_sse_and_refusals(make_gateway: GatewayFactory) -> None:
    gateway = await make_gateway()
    ping = '{"jsonrpc": "2.0", "id": 7, "method": "ping"}'
    status, kind, text = await post(gateway, ping)
    assert (status, text) == (200, '{"jsonrpc": "2.0", "id": 7, "result": {}}')
    assert kind.startswith("application/json")
    status, kind, text = await post(gateway, ping, Accept="text/event-stream")
    assert status == 200 and kind.startswith("text/event-stream")
    assert text.startswith("event: message\ndata: {")
    note = '{"jsonrpc": "2.0", "method": "notifications/initialized"}'
    assert (await post(gateway, note))[0] == 202
    status, _, text = await post(gateway, "{not json")
    assert status == 400 and '"code": -32700' in text
    status, _, text = await post(gateway, '{"jsonrpc": "2.0", "id": 1, "method": "resources/list"}')
    assert status == 200 and '"code": -32601' in text
    status, _, text = await post(gateway, ping, **{"MCP-Protocol-Version": "1999-01-01"})
    assert status == 400 and "1999-01-01" in text
    async with aiohttp.ClientSession() as session, session.get(gateway.url + PATH) as r:
        assert r.status == 405
    rebound = {"Host": "evil.example.com", "Origin": "http://evil.example.com"}
    status, _, text = await post(gateway, ping, **rebound)  # DNS rebinding: never served
    assert status == 403 and "evil.example.com" in text


@pytest.mark.sqlite
async def test_the_admin_token_guards_it_as_the_read_api(make_gateway: GatewayFactory) -> None:
    gateway = await make_gateway(admin_token=TOKEN)
    ping = '{"jsonrpc": "2.0", "id": 1, "method": "ping"}'
    status, _, text = await post(gateway, ping)
    assert status == 401 and "invalid_admin_token" in text
    assert (await post(gateway, ping, Authorization="Bearer wrong-token-0123456789"))[0] == 401
    with pytest.raises(ExceptionGroup) as refused:  # the SDK's task group holds the 401
        async with traces_client(gateway):
            pass
    assert refused.group_contains(MCPError)
    async with traces_client(gateway, MODERN, {"Authorization": f"Bearer {TOKEN}"}) as client:
        assert {tool.name for tool in (await client.list_tools()).tools} == TOOLS


@pytest.mark.sqlite
async def test_a_proxied_server_named_like_it_stays_apart(make_gateway: GatewayFactory) -> None:
    """`/mcp/{name}` is the proxy; the trace server lives under /api, never a server name."""
    gateway = await make_gateway()
    async with aiohttp.ClientSession() as session:
        body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        async with session.post(gateway.url + "/mcp/traces", json=body) as r:
            assert r.status == 404 and "'traces'" in (await r.json())["error"]["message"]
