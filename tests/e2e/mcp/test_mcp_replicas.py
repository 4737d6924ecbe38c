"""Two gateways on one database (workers or replicas): the model's steps go through one, the
MCP calls through the other. The execution still joins the model's call (looked up in the
store), is marked delivered, a violation found before the join counts on the run, and an
`unrequested_tool_execution` judged before it is withdrawn."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.app import DEPS, MCP
from gateway.proxy.mcp.runtime import McpSink
from tests.e2e.mcp.mcp_harness import mcp_gateway, mcp_url  # noqa: F401
from tests.e2e.mcp.test_mcp_agent import TOOLS, mcp_client, openai_client
from tests.fakes.chat import call, completion
from tests.harness import Gateway, GatewayFactory, make_gateway, provider  # noqa: F401
from tests.traffic import scrape, value


async def _stored(model_side: Gateway, mcp_side: Gateway) -> None:
    """The model side's steps stored, then the MCP side's records and store look-ups."""
    await model_side.flush()
    assert await model_side.app[MCP].flush()
    assert await mcp_side.app[MCP].flush()


@pytest.mark.parametrize("join", ["content", "header"])
async def test_a_call_answered_by_another_gateway_joins_and_is_delivered(
    make_gateway: GatewayFactory, mcp_url: str, join: str
) -> None:
    model_side = await mcp_gateway(make_gateway, mcp_url)
    mcp_side = await mcp_gateway(make_gateway, mcp_url)
    assert [sink for sink in mcp_side.app[DEPS].sinks if isinstance(sink, McpSink)]
    model_side.provider.queue(
        completion(tool_calls=[call("call_r1", "tools__read_text_file", {"path": "/r"})]),
        completion("Two lines."),
    )
    sdk = openai_client(model_side)
    messages: list[Any] = [{"role": "user", "content": "What is in /r?"}]
    raw = await sdk.chat.completions.with_raw_response.create(
        model="gpt-4o", messages=messages, tools=TOOLS
    )
    trace_id = raw.headers["X-Loopwatch-Trace-Id"]
    await model_side.flush()  # the step is in the store, not in the other gateway's memory
    named = {"X-Loopwatch-Trace-Id": trace_id} if join == "header" else {}
    async with mcp_client(mcp_side, named) as client:
        result = await client.call_tool("read_text_file", {"path": "/r"})
    text = result.content[0].text  # type: ignore[union-attr]
    messages.append(raw.parse().choices[0].message.model_dump(exclude_none=True))
    messages.append({"role": "tool", "tool_call_id": "call_r1", "content": text})
    await sdk.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS)
    await _stored(model_side, mcp_side)
    trace = await model_side.trace(trace_id)
    [execution] = trace["tool_executions"]
    assert (execution["call_id"], execution["join"]) == ("call_r1", join)
    assert execution["outcome"] == "ok" and execution["delivery"] == "delivered"
    # The model asked for it, though in another process: no unrequested_tool_execution.
    assert trace["violations"] == [] and trace["violation_count"] == 0
    assert (await model_side.get("/api/mcp/executions"))["executions"] == []


async def test_a_violation_found_before_the_join_counts_on_the_run(
    make_gateway: GatewayFactory, mcp_url: str
) -> None:
    model_side = await mcp_gateway(make_gateway, mcp_url)
    mcp_side = await mcp_gateway(make_gateway, mcp_url)
    async with mcp_client(mcp_side) as client:  # the agent runs its tool first
        await client.list_tools()
        await client.call_tool("read_text_file", {"path": 7})  # not a string
    assert await mcp_side.app[MCP].flush()
    [unjoined] = (await mcp_side.get("/api/mcp/executions"))["executions"]
    assert unjoined["join"] == "none"
    before = (await mcp_side.get("/api/violations"))["violations"]
    assert sorted((v["kind"], v["trace_id"]) for v in before) == [
        ("invalid_tool_arguments", None),
        ("unrequested_tool_execution", None),  # judged: no model call asked for it, yet
    ]
    model_side.provider.queue(
        completion(tool_calls=[call("call_v1", "tools__read_text_file", {"path": 7})])
    )
    raw = await openai_client(model_side).chat.completions.with_raw_response.create(
        model="gpt-4o", messages=[{"role": "user", "content": "Read 7."}], tools=TOOLS
    )
    trace_id = raw.headers["X-Loopwatch-Trace-Id"]
    await _stored(model_side, mcp_side)
    await _stored(model_side, mcp_side)  # looked up again: counted once all the same
    trace = await model_side.trace(trace_id)
    [execution] = trace["tool_executions"]
    assert (execution["call_id"], execution["join"]) == ("call_v1", "content")
    mcp_kinds = [v["kind"] for v in trace["violations"] if v.get("source") == "mcp"]
    assert mcp_kinds == ["invalid_tool_arguments"]
    # The model's call broke the declared schema too: one violation each side.
    assert trace["violation_count"] == len(trace["violations"]) == 2
    # Counted once, when found, though stored again with its run.
    samples = await scrape(mcp_side)
    assert value(samples, "loopwatch_violations_total", kind="invalid_tool_arguments") == 1
    # The model's call came after all: the unrequested judgment is withdrawn.
    after = (await mcp_side.get("/api/violations"))["violations"]
    assert sorted(v["kind"] for v in after if v.get("source") == "mcp") == [
        "invalid_tool_arguments"
    ]
