"""An agent loop across both wires: the model asks for a tool through the gateway (openai
SDK), the agent runs it through /mcp/{name} (MCP SDK), the result goes back to the model.
The execution joins the model's call and is marked delivered, truncated or transformed."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx2
import openai
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from gateway.sinks.otlp.ids import trace_id_of
from tests.e2e.mcp.mcp_harness import flush, mcp_gateway, mcp_url  # noqa: F401
from tests.fakes.chat import call, completion
from tests.harness import Gateway, GatewayFactory, make_gateway, provider  # noqa: F401

pytestmark = pytest.mark.sqlite  # the MCP side is what varies here

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "tools__read_text_file",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
]


def openai_client(gateway: Gateway) -> openai.AsyncOpenAI:
    return gateway.closing(
        openai.AsyncOpenAI(
            base_url=gateway.openai_base, api_key="sk-test-clientkey1234567890", max_retries=0
        )
    )


@contextlib.asynccontextmanager
async def mcp_client(
    gateway: Gateway, headers: dict[str, str] | None = None
) -> AsyncIterator[Client]:
    """An MCP client session; the HTTP client it was given is ours to close."""
    async with httpx2.AsyncClient(headers=headers or {}, timeout=30) as http:
        transport = streamable_http_client(f"{gateway.url}/mcp/tools", http_client=http)
        async with Client(transport, cache=None) as client:
            yield client


async def agent_loop(
    gateway: Gateway,
    *,
    join: str = "content",
    give_model: Callable[[str], str] = lambda text: text,
    path: str = "/srv/notes.txt",
) -> str:
    """One tool round trip; returns the trace id."""
    gateway.provider.queue(
        completion(tool_calls=[call("call_read1", "tools__read_text_file", {"path": path})]),
        completion("The file has two lines.", response_id="chatcmpl-2"),
    )
    sdk = openai_client(gateway)
    messages: list[Any] = [{"role": "user", "content": f"What is in {path}?"}]
    raw = await sdk.chat.completions.with_raw_response.create(
        model="gpt-4o", messages=messages, tools=TOOLS
    )
    trace_id = raw.headers["X-Loopwatch-Trace-Id"]
    message = raw.parse().choices[0].message
    [tool_call] = message.tool_calls or []
    headers: dict[str, str] = {}
    meta: dict[str, Any] | None = None
    if join == "header":
        headers["X-Loopwatch-Trace-Id"] = trace_id
    elif join == "meta":
        meta = {"loopwatch/tool_call_id": tool_call.id}
    elif join == "traceparent":
        headers["traceparent"] = f"00-{trace_id_of(trace_id):032x}-00f067aa0ba902b7-01"
    async with mcp_client(gateway, headers) as client:
        result = await client.call_tool("read_text_file", {"path": path}, meta=meta)
    text = result.content[0].text  # type: ignore[union-attr]
    messages.append(message.model_dump(exclude_none=True))
    messages.append({"role": "tool", "tool_call_id": tool_call.id, "content": give_model(text)})
    await sdk.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS)
    return trace_id


@pytest.mark.parametrize("join", ["content", "header", "meta", "traceparent"])
async def test_execution_joins_the_model_call_and_is_delivered(
    make_gateway: GatewayFactory, mcp_url: str, join: str
) -> None:
    gateway = await mcp_gateway(make_gateway, mcp_url)
    trace_id = await agent_loop(gateway, join=join)
    await flush(gateway)
    trace = await gateway.trace(trace_id)
    assert trace["step_count"] == 2
    [execution] = trace["tool_executions"]
    assert execution["call_id"] == "call_read1" and execution["trace_id"] == trace_id
    assert execution["join"] == join
    assert execution["server"] == "tools" and execution["tool"] == "read_text_file"
    assert execution["outcome"] == "ok" and execution["delivery"] == "delivered"
    [asked] = [i for i in trace["steps"][0]["output_items"] if i["kind"] == "tool_call"]
    assert [e["id"] for e in asked["executions"]] == [execution["id"]]
    assert not [v for v in trace["violations"] if v.get("source") == "mcp"]
    assert (await gateway.get("/api/mcp/executions"))["executions"] == []


@pytest.mark.parametrize(
    ("give_model", "delivery"),
    [
        (lambda text: text[:30] + " …[truncated]", "truncated"),
        (lambda text: "The file is short and holds a key.", "transformed"),
        (lambda text: f"<result>{text}</result>", "delivered"),
    ],
)
async def test_what_the_model_got_is_classified(
    make_gateway: GatewayFactory, mcp_url: str, give_model: Callable[[str], str], delivery: str
) -> None:
    gateway = await mcp_gateway(make_gateway, mcp_url)
    trace_id = await agent_loop(gateway, give_model=give_model)
    await flush(gateway)
    [execution] = (await gateway.trace(trace_id))["tool_executions"]
    assert execution["delivery"] == delivery


async def test_two_equal_model_calls_leave_the_execution_ambiguous(
    make_gateway: GatewayFactory, mcp_url: str
) -> None:
    gateway = await mcp_gateway(make_gateway, mcp_url)
    sdk = openai_client(gateway)
    for n in (1, 2):
        gateway.provider.queue(
            completion(tool_calls=[call(f"call_same{n}", "read_text_file", {"path": "/a"})])
        )
        await sdk.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": f"run {n}"}], tools=TOOLS
        )
    async with mcp_client(gateway) as client:
        await client.call_tool("read_text_file", {"path": "/a"})
    await flush(gateway)
    [execution] = (await gateway.get("/api/mcp/executions", params={"join": "ambiguous"}))[
        "executions"
    ]
    assert execution["call_id"] is None and execution["trace_id"] is None
    assert (await gateway.get("/api/mcp/executions", params={"join": "none"}))["executions"] == []
