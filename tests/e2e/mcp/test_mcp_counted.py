"""MCP violations count like the model's: on the trace, in its filter, in the violations
list, in the metrics and to webhooks; and a run with only tool executions is visible."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from tests.conftest import Database  # noqa: F401
from tests.e2e.mcp.mcp_harness import flush, mcp_gateway, mcp_url  # noqa: F401
from tests.e2e.mcp.test_mcp_agent import agent_loop, mcp_client
from tests.harness import Gateway, GatewayFactory, make_gateway, provider  # noqa: F401
from tests.traffic import scrape, value


async def _undeclared_call(gateway: Gateway, trace_id: str) -> None:
    async with mcp_client(gateway, {"X-Loopwatch-Trace-Id": trace_id}) as client:
        await client.list_tools()
        await client.call_tool("format_disk", {})


async def test_mcp_violations_count_on_the_trace_the_list_and_the_metrics(
    make_gateway: GatewayFactory, mcp_url: str
) -> None:
    gateway = await mcp_gateway(make_gateway, mcp_url)
    trace_id = await agent_loop(gateway)
    await flush(gateway)
    assert (await gateway.trace(trace_id))["violation_count"] == 0
    assert await gateway.traces(has_violations="true") == []
    await _undeclared_call(gateway, trace_id)
    await flush(gateway)
    trace = await gateway.trace(trace_id)
    kinds = sorted(v["kind"] for v in trace["violations"] if v.get("source") == "mcp")
    assert kinds == ["undeclared_tool", "unrequested_tool_execution"]
    assert trace["violation_count"] == 2 and trace["has_violations"] is True
    assert [t["id"] for t in await gateway.traces(has_violations="true")] == [trace_id]
    assert [t["id"] for t in await gateway.traces(violation="undeclared_tool")] == [trace_id]
    listed = (await gateway.get("/api/violations"))["violations"]
    assert sorted((v["kind"], v["source"], v["trace_id"]) for v in listed) == [
        ("undeclared_tool", "mcp", trace_id),
        ("unrequested_tool_execution", "mcp", trace_id),
    ]
    one_kind = (await gateway.get("/api/violations?violation=undeclared_tool"))["violations"]
    assert [v["kind"] for v in one_kind] == ["undeclared_tool"]
    samples = await scrape(gateway)
    assert value(samples, "loopwatch_violations_total", kind="undeclared_tool") == 1
    assert value(samples, "loopwatch_violations_total", kind="unrequested_tool_execution") == 1


async def test_the_violations_list_pages_across_both_sides(
    make_gateway: GatewayFactory, mcp_url: str
) -> None:
    gateway = await mcp_gateway(make_gateway, mcp_url)
    for run in ("run-a", "run-b"):
        await _undeclared_call(gateway, run)
    await flush(gateway)
    seen = await _all_pages(gateway, "limit=3")
    assert len({v["id"] for v in seen}) == len(seen) == 4
    one_run = await _all_pages(gateway, "limit=1&trace_id=run-a")  # one a page: keyset paging
    assert len({v["id"] for v in one_run}) == len(one_run) == 2
    assert {(v["trace_id"], v["source"]) for v in one_run} == {("run-a", "mcp")}
    assert await _all_pages(gateway, "trace_id=run-none") == []


async def _all_pages(gateway: Gateway, query: str) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    cursor = ""
    while True:
        page = await gateway.get(f"/api/violations?{query}{cursor}")
        seen += page["violations"]
        if page["next_cursor"] is None:
            return seen
        cursor = f"&cursor={page['next_cursor']}"


async def test_a_run_with_only_mcp_activity_is_visible(
    make_gateway: GatewayFactory, mcp_url: str
) -> None:
    gateway = await mcp_gateway(make_gateway, mcp_url)
    async with mcp_client(gateway, {"X-Loopwatch-Trace-Id": "tools-only"}) as client:
        await client.list_tools()
        await client.call_tool("read_text_file", {"path": "/srv/notes.txt"})
    await flush(gateway)
    trace = await gateway.trace("tools-only")
    assert trace["steps"] == []
    [execution] = trace["tool_executions"]
    assert (execution["tool"], execution["outcome"], execution["join"]) == (
        "read_text_file",
        "ok",
        "header",
    )
    assert trace["violation_count"] == 1  # no model call asked for it
    assert [t["id"] for t in await gateway.traces()] == ["tools-only"]


async def test_mcp_violations_reach_the_webhooks(
    aiohttp_server: Any, make_gateway: GatewayFactory, mcp_url: str
) -> None:
    events: list[dict[str, Any]] = []
    arrived = asyncio.Event()

    async def hook(request: web.Request) -> web.Response:
        events.append(await request.json())
        if len(events) == 2:
            arrived.set()
        return web.Response(status=204)

    app = web.Application()
    app.router.add_post("/hook", hook)
    server = await aiohttp_server(app)
    gateway = await mcp_gateway(
        make_gateway, mcp_url, webhook_urls=(str(server.make_url("/hook")),)
    )
    await _undeclared_call(gateway, "hooked")
    await asyncio.wait_for(arrived.wait(), 10)
    assert sorted((e["kind"], e["source"], e["server"], e["trace_id"]) for e in events) == [
        ("undeclared_tool", "mcp", "tools", "hooked"),
        ("unrequested_tool_execution", "mcp", "tools", "hooked"),
    ]
