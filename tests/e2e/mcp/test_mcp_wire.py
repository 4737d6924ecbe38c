"""The byte path of /mcp/{name} with raw HTTP: sessions, the GET stream and DELETE; the
2026-07-28 routing headers; headers both ways; a client going away cancels the server's
request (a fake MCP server speaking real HTTP/SSE records what reached it)."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest

from tests.e2e.mcp.mcp_harness import flush, mcp_gateway, mcp_url  # noqa: F401
from tests.fakes.provider import Reply
from tests.harness import Gateway, GatewayFactory, make_gateway, provider  # noqa: F401

pytestmark = pytest.mark.sqlite  # the MCP side is what varies here

ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}


async def test_session_get_stream_and_delete_pass(
    make_gateway: GatewayFactory, mcp_url: str
) -> None:
    gateway = await mcp_gateway(make_gateway, mcp_url)
    url = f"{gateway.url}/mcp/tools"
    async with aiohttp.ClientSession() as http:
        async with http.post(url, json=INIT, headers=ACCEPT) as r:
            assert r.status == 200
            session = r.headers["Mcp-Session-Id"]
            await r.read()
        headers = {**ACCEPT, "Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        async with http.post(url, json=note, headers=headers) as r:
            assert r.status == 202
        stream_headers = {**headers, "Accept": "text/event-stream"}
        async with http.get(url, headers=stream_headers) as stream:
            assert stream.status == 200
            assert stream.content_type == "text/event-stream"
        async with http.delete(url, headers=headers) as r:
            assert r.status in (200, 204)
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        async with http.post(url, json=ping, headers=headers) as r:
            assert r.status == 404  # the session is gone on the server


async def test_modern_requests_carry_their_routing_headers(
    make_gateway: GatewayFactory, mcp_url: str
) -> None:
    """2026-07-28: no session; the server checks Mcp-Method and Mcp-Name against the body,
    so a proxy that dropped or changed them would be refused."""
    gateway = await mcp_gateway(make_gateway, mcp_url)
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
    }
    body = {
        "jsonrpc": "2.0",
        "id": 5,
        "method": "tools/call",
        "params": {"name": "read_text_file", "arguments": {"path": "/m"}, "_meta": meta},
    }
    headers = {
        **ACCEPT,
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": "read_text_file",
    }
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{gateway.url}/mcp/tools", json=body, headers=headers) as r:
            text = await r.text()
            assert r.status == 200, text
        wrong = {**headers, "Mcp-Name": "weather"}
        async with http.post(f"{gateway.url}/mcp/tools", json=body, headers=wrong) as r:
            assert r.status == 400  # the server saw the header as sent
    assert "contents of /m" in text
    await flush(gateway)
    executions = (await gateway.get("/api/mcp/executions"))["executions"]
    assert [e["protocol_version"] for e in executions if e["outcome"] == "ok"] == ["2026-07-28"]


async def test_headers_pass_both_ways_and_a_client_going_away_cancels(
    make_gateway: GatewayFactory,
) -> None:
    gateway = await make_gateway()
    fake = gateway.provider
    await _replace_servers(gateway, f"{fake.url}/mcp")  # type: ignore[attr-defined]
    progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}
    events = [f"event: message\ndata: {json.dumps(progress)}\n\n".encode()] * 50
    fake.queue(
        Reply(
            events=events,
            pause=0.1,
            headers={"WWW-Authenticate": 'Bearer realm="mcp"', "Mcp-Session-Id": "s-1"},
        )
    )
    call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "t"}}
    sent = {
        **ACCEPT,
        "Authorization": "Bearer client-token-123",
        "Mcp-Param-Region": "eu",
        "Last-Event-ID": "41",
        "X-Loopwatch-Trace-Id": "run-9",
    }
    async with aiohttp.ClientSession() as http:
        response = await http.post(f"{gateway.url}/mcp/fake", json=call, headers=sent)
        assert response.headers["WWW-Authenticate"] == 'Bearer realm="mcp"'
        assert response.headers["Mcp-Session-Id"] == "s-1"
        await response.content.readuntil(b"\n\n")
        response.close()  # the client goes away mid-stream
    await asyncio.wait_for(fake.disconnected.wait(), 10)
    received = fake.received[-1].headers
    assert received["Authorization"] == "Bearer client-token-123"
    assert received["Mcp-Param-Region"] == "eu" and received["Last-Event-ID"] == "41"
    assert "X-Loopwatch-Trace-Id" not in received  # ours, not the server's
    await flush(gateway)
    from gateway.store.read import mcp as reads

    [execution] = reads.trace_executions(gateway.deps.engine, "run-9")
    assert execution["outcome"] == "rpc_error"
    assert execution["error"] == {"message": "the client went away"}


async def _replace_servers(gateway: Gateway, url: str) -> None:
    """The fake's endpoint as server `fake` (the app is built; its runtime holds the map)."""
    from gateway.app import MCP
    from gateway.config import McpServer

    gateway.app[MCP].servers["fake"] = McpServer(name="fake", url=url)


async def test_structured_content_against_the_output_schema(make_gateway: GatewayFactory) -> None:
    gateway = await make_gateway()
    fake = gateway.provider
    await _replace_servers(gateway, f"{fake.url}/mcp")  # type: ignore[attr-defined]
    tool = {
        "name": "weather",
        "description": "Weather.",
        "inputSchema": {"type": "object"},
        "outputSchema": {
            "type": "object",
            "properties": {"celsius": {"type": "number"}},
            "required": ["celsius"],
        },
    }
    fake.queue(
        Reply(body={"jsonrpc": "2.0", "id": 1, "result": {"tools": [tool]}}),
        Reply(
            body={
                "jsonrpc": "2.0",
                "id": 2,
                "result": {"content": [], "structuredContent": {"celsius": "warm"}},
            }
        ),
    )
    headers = {**ACCEPT, "X-Loopwatch-Trace-Id": "run-out"}
    async with aiohttp.ClientSession() as http:
        for message in (
            {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "weather"}},
        ):
            async with http.post(f"{gateway.url}/mcp/fake", json=message, headers=headers) as r:
                assert r.status == 200
                await r.read()
    await flush(gateway)
    from gateway.store.read import mcp as reads

    found = reads.trace_violations(gateway.deps.engine, "run-out")
    invalid = [v for v in found if v["kind"] == "invalid_tool_output"]
    assert len(invalid) == 1 and "celsius" in invalid[0]["detail"]
    assert invalid[0]["source"] == "mcp"
