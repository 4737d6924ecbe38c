"""Streamable HTTP resumability: a call whose stream the server closes mid-call is resumed by
the client on a GET stream (`Last-Event-ID`); its result arrives there, and the execution is
recorded with the outcome the client saw."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from mcp import Client

from tests.e2e.mcp.mcp_harness import flush, mcp_gateway, mcp_server_process
from tests.harness import GatewayFactory, make_gateway, provider  # noqa: F401

pytestmark = pytest.mark.sqlite


@pytest.fixture(scope="module")
def resumable_url() -> Iterator[str]:
    with mcp_server_process("tests.e2e.mcp.mcp_resumable_server") as url:
        yield url


async def test_a_result_on_a_resumed_stream_is_recorded_as_the_client_saw_it(
    make_gateway: GatewayFactory, resumable_url: str
) -> None:
    gateway = await mcp_gateway(make_gateway, resumable_url)
    async with Client(f"{gateway.url}/mcp/tools", mode="legacy", cache=None) as client:
        result = await client.call_tool("answer_later", {"text": "hello"})
    assert result.content[0].text == "later: hello"  # type: ignore[union-attr]
    await flush(gateway)
    executions = (await gateway.get("/api/mcp/executions", params={"join": "none"}))["executions"]
    [execution] = [e for e in executions if e["tool"] == "answer_later"]
    assert execution["error"] is None
    assert execution["outcome"] == "ok"
    assert execution["result"]["content"][0]["text"] == "later: hello"
    assert execution["duration_ms"] >= 500  # till the answer, on the resumed stream
