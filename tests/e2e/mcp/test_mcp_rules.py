"""The MCP rules through the whole gateway, with the official SDK on both ends: enforcement
answers in the server's stead, a changed tool list is flagged on the run, arguments and
results are redacted in the database, and all of it holds on PostgreSQL too."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.conftest import PG_URL, Database
from tests.e2e.mcp.mcp_harness import flush, mcp_gateway, mcp_server_process, mcp_url  # noqa: F401
from tests.e2e.mcp.test_mcp_agent import agent_loop, mcp_client
from tests.e2e.proxy.test_proxy_unhappy import database_bytes
from tests.harness import Gateway, GatewayFactory, make_gateway, provider  # noqa: F401


def mcp_violations(trace: dict[str, Any]) -> list[dict[str, Any]]:
    return [v for v in trace["violations"] if v.get("source") == "mcp"]


async def test_enforcement_refuses_an_unrequested_call_without_calling_the_server(
    make_gateway: GatewayFactory, mcp_url: str
) -> None:
    gateway = await mcp_gateway(make_gateway, mcp_url, mcp_enforce=True)
    async with mcp_client(gateway) as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("read_text_file", {"path": "/etc/shadow"})
        before = await Client(mcp_url, mode="legacy", cache=None).__aenter__()
        try:
            ran = (await before.call_tool("calls_made", {})).structured_content
        finally:
            await before.__aexit__(None, None, None)
    assert "unrequested_tool_execution" in str(refused.value)
    assert ran == {"result": []}
    await flush(gateway)
    [execution] = (await gateway.get("/api/mcp/executions"))["executions"]
    assert execution["outcome"] == "refused"


@pytest.mark.parametrize("enforce", [False, True])
async def test_observe_and_enforce_agree_on_a_call_no_model_call_asked_for(
    make_gateway: GatewayFactory, mcp_url: str, enforce: bool
) -> None:
    gateway = await mcp_gateway(make_gateway, mcp_url, mcp_enforce=enforce)
    await agent_loop(gateway)  # a run whose model asked for another file
    async with mcp_client(gateway) as client:  # no trace header, _meta or traceparent
        if enforce:
            with pytest.raises(MCPError) as refused:
                await client.call_tool("read_text_file", {"path": "/etc/shadow"})
            assert "unrequested_tool_execution" in str(refused.value)
        else:
            ran = await client.call_tool("read_text_file", {"path": "/etc/shadow"})
            assert not ran.is_error
    await flush(gateway)
    [violation] = (await gateway.get("/api/violations"))["violations"]
    assert (violation["kind"], violation["source"]) == ("unrequested_tool_execution", "mcp")
    assert (violation["trace_id"], violation["enforced"]) == (None, enforce)
    [execution] = (await gateway.get("/api/mcp/executions", params={"join": "none"}))["executions"]
    assert execution["id"] == violation["execution_id"]
    assert execution["outcome"] == ("refused" if enforce else "ok")


async def test_enforcement_lets_the_model_s_call_through(
    make_gateway: GatewayFactory, mcp_url: str
) -> None:
    gateway = await mcp_gateway(make_gateway, mcp_url, mcp_enforce=True)
    trace_id = await agent_loop(gateway, path="/srv/allowed.txt")
    await flush(gateway)
    [execution] = (await gateway.trace(trace_id))["tool_executions"]
    assert (execution["outcome"], execution["delivery"]) == ("ok", "delivered")


async def test_a_tool_list_changed_during_a_run_is_flagged_on_it(
    make_gateway: GatewayFactory,
) -> None:
    with mcp_server_process() as url:  # its own server: this test changes the tool list
        gateway = await mcp_gateway(make_gateway, url)
        async with mcp_client(gateway) as client:
            await client.list_tools()
        trace_id = await agent_loop(gateway)
        async with mcp_client(gateway, {"X-Loopwatch-Trace-Id": trace_id}) as client:
            await client.call_tool("rotate", {})
            await client.list_tools()
        await flush(gateway)
    found = mcp_violations(await gateway.trace(trace_id))
    kinds = sorted(v["kind"] for v in found)
    assert kinds == ["tool_list_changed", "unrequested_tool_execution"]
    [changed] = [v for v in found if v["kind"] == "tool_list_changed"]
    assert "'read_text_file' description changed" in changed["detail"]


async def test_undeclared_tool_and_invalid_arguments_are_recorded(
    make_gateway: GatewayFactory, mcp_url: str
) -> None:
    gateway = await mcp_gateway(make_gateway, mcp_url)
    trace_id = await agent_loop(gateway)
    async with mcp_client(gateway, {"X-Loopwatch-Trace-Id": trace_id}) as client:
        await client.list_tools()
        await client.call_tool("format_disk", {})
        await client.call_tool("read_text_file", {"path": 42})
    await flush(gateway)
    kinds = sorted(v["kind"] for v in mcp_violations(await gateway.trace(trace_id)))
    assert kinds == [
        "invalid_tool_arguments",
        "undeclared_tool",
        "unrequested_tool_execution",
        "unrequested_tool_execution",
    ]


def stored_text(database: Database) -> str:
    if database.path is not None:
        return database_bytes(database.url).decode("utf-8", "replace")
    with psycopg.connect(PG_URL, options=f"-csearch_path={database.schema}") as conn:
        rows = conn.execute("SELECT arguments::text, result::text FROM mcp_executions").fetchall()
    return repr(rows)


async def test_arguments_and_results_are_redacted_in_the_database(
    make_gateway: GatewayFactory, mcp_url: str, database: Database
) -> None:
    gateway = await mcp_gateway(make_gateway, mcp_url)
    trace_id = await agent_loop(gateway)
    async with mcp_client(gateway, {"X-Loopwatch-Trace-Id": trace_id}) as client:
        await client.call_tool("read_text_file", {"path": "/b", "token": "hunter2-very-secret"})
    await flush(gateway)
    trace = await gateway.trace(trace_id)
    assert [e["delivery"] for e in trace["tool_executions"]] == ["delivered", None]
    stored = stored_text(database)
    assert "contents of /srv/notes.txt" in stored
    assert "sk-live-abcdef0123456789abcdef" not in stored
    assert "hunter2-very-secret" not in stored


async def test_with_enforcement_a_run_over_budget_gets_no_more_tool_calls(
    make_gateway: GatewayFactory, mcp_url: str
) -> None:
    gateway = await mcp_gateway(make_gateway, mcp_url, mcp_enforce=True, max_steps=1)
    trace_id = await agent_loop_refused(gateway)
    async with mcp_client(gateway, {"X-Loopwatch-Trace-Id": trace_id}) as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("read_text_file", {"path": "/srv/notes.txt"})
    assert "step_budget_exceeded" in str(refused.value)


async def agent_loop_refused(gateway: Gateway) -> str:
    """The agent loop of test_mcp_agent, whose second model request the budget refuses."""
    import openai

    with pytest.raises(openai.RateLimitError):
        await agent_loop(gateway)
    [trace] = await gateway.traces()
    return str(trace["id"])
