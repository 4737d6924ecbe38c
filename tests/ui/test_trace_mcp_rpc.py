"""The trace MCP server's JSON-RPC surface without a transport: version negotiation of both
generations, what each answers, errors as JSON-RPC errors."""

from __future__ import annotations

from typing import Any

from gateway.ui.mcp_server.answers import Answer, NoSuchTrace
from gateway.ui.mcp_server.rpc import Dispatcher

META = "io.modelcontextprotocol/protocolVersion"


async def run(name: str, arguments: dict[str, Any]) -> Answer:
    if arguments.get("trace_id") == "tr-gone":
        raise NoSuchTrace("no trace tr-gone")
    return f"{name} ran", {"arguments": sorted(arguments)}


def request(method: str, params: dict[str, Any] | None = None, id_: int = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "method": method, "params": params or {}}


async def test_the_handshake_settles_on_a_version_it_knows() -> None:
    server = Dispatcher(run, "1.2.3")
    answer = await server.answer(request("initialize", {"protocolVersion": "2099-01-01"}))
    assert answer is not None and answer["result"]["protocolVersion"] == "2025-11-25"
    assert answer["result"]["serverInfo"]["version"] == "1.2.3"
    assert answer["result"]["capabilities"] == {"tools": {"listChanged": False}}
    old = Dispatcher(run, "1")
    await old.answer(request("initialize", {"protocolVersion": "2025-03-26"}))
    called = await old.answer(request("tools/call", {"name": "explain_run"}))
    assert called is not None and "structuredContent" not in called["result"]  # before 06-18


async def test_modern_requests_are_complete_results_without_a_handshake() -> None:
    server = Dispatcher(run, "1")
    meta = {"_meta": {META: "2026-07-28"}}
    discovered = await server.answer(request("server/discover", meta))
    assert discovered is not None and "2026-07-28" in discovered["result"]["supportedVersions"]
    listed = await server.answer(request("tools/list", meta))
    assert listed is not None and listed["result"]["resultType"] == "complete"
    called = await server.answer(
        request("tools/call", {"name": "search", "arguments": {"query": "x"}, **meta})
    )
    assert called is not None
    assert called["result"]["structuredContent"] == {"arguments": ["limit", "query"]}
    refused = await server.answer(request("ping", {"_meta": {META: "2030-01-01"}}))
    assert refused is not None and refused["error"]["code"] == -32022


async def test_faults_are_json_rpc_errors_and_a_missing_run_a_tool_error() -> None:
    server = Dispatcher(run, "1")
    assert await server.answer({"jsonrpc": "2.0", "method": "notifications/initialized"}) is None
    bad = await server.answer({"id": 3, "method": "ping"})
    assert bad is not None and bad["error"]["code"] == -32600
    unknown = await server.answer(request("tools/call", {"name": "rm"}))
    assert unknown is not None and unknown["error"]["code"] == -32602
    params = await server.answer({"jsonrpc": "2.0", "id": 4, "method": "ping", "params": [1]})
    assert params is not None and params["error"]["code"] == -32602
    gone = await server.answer(
        request("tools/call", {"name": "get_trace", "arguments": {"trace_id": "tr-gone"}})
    )
    assert gone is not None and gone["result"]["isError"] is True
    assert gone["result"]["content"] == [{"type": "text", "text": "no trace tr-gone"}]
