"""`/mcp/{name}` with the official MCP SDK as client and server: both protocol generations
pass, progress streams through as it comes, errors and headers pass unchanged."""

from __future__ import annotations

import json
import time
from typing import Any

import aiohttp
import pytest
from mcp import Client

from tests.e2e.mcp.mcp_harness import flush, mcp_gateway, mcp_url  # noqa: F401
from tests.harness import Gateway, GatewayFactory, make_gateway, provider  # noqa: F401
from tests.processes import serving

pytestmark = pytest.mark.sqlite  # the MCP side is what varies here

LEGACY = "legacy"
MODERN = "2026-07-28"


@pytest.mark.parametrize("mode", [LEGACY, MODERN])
async def test_tools_list_and_call_through_the_gateway(
    make_gateway: GatewayFactory, mcp_url: str, mode: str
) -> None:
    gateway = await mcp_gateway(make_gateway, mcp_url)
    async with Client(f"{gateway.url}/mcp/tools", mode=mode, cache=None) as client:
        tools = await client.list_tools()
        result = await client.call_tool("read_text_file", {"path": "/etc/motd"})
        version = client.protocol_version
    assert "read_text_file" in {tool.name for tool in tools.tools}
    assert result.content[0].text.startswith("contents of /etc/motd")  # type: ignore[union-attr]
    assert (version == MODERN) is (mode == MODERN)
    await flush(gateway)
    servers = (await gateway.get("/api/mcp/servers"))["servers"]
    assert [s["name"] for s in servers] == ["tools"]
    assert {t["name"] for t in servers[0]["tools"]} >= {"read_text_file", "weather", "slow_count"}
    assert servers[0]["calls"] == 1
    [execution] = (await gateway.get("/api/mcp/executions", params={"join": "none"}))["executions"]
    assert execution["tool"] == "read_text_file"
    assert execution["arguments"] == {"path": "/etc/motd"}
    assert execution["outcome"] == "ok" and execution["is_error"] is False
    assert execution["protocol_version"] == version
    assert execution["trace_id"] is None and execution["call_id"] is None
    assert execution["duration_ms"] > 0


async def test_unknown_server_is_a_json_rpc_404_naming_it(
    make_gateway: GatewayFactory, mcp_url: str
) -> None:
    gateway = await mcp_gateway(make_gateway, mcp_url)
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{gateway.url}/mcp/nope", json={"jsonrpc": "2.0", "id": 1, "method": "ping"}
        ) as r,
    ):
        assert r.status == 404
        body = await r.json()
    assert body["jsonrpc"] == "2.0" and body["id"] is None
    assert "'nope'" in body["error"]["message"]


@pytest.mark.parametrize("mode", [LEGACY, MODERN])
async def test_progress_arrives_before_the_final_answer(
    make_gateway: GatewayFactory, mcp_url: str, mode: str
) -> None:
    gateway = await mcp_gateway(make_gateway, mcp_url)
    seen: list[float] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        seen.append(time.monotonic())

    async with Client(f"{gateway.url}/mcp/tools", mode=mode, cache=None) as client:
        result = await client.call_tool("slow_count", {"n": 4}, progress_callback=progress)
        answered = time.monotonic()
    assert result.content[0].text == "counted to 4"  # type: ignore[union-attr]
    assert len(seen) == 4
    # The server waits 0.3 s after each progress: the first came ~1.2 s before the answer.
    assert answered - seen[0] > 0.6


async def _post(
    url: str, body: bytes, headers: dict[str, str]
) -> tuple[int, dict[str, str], bytes]:
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, data=body, headers=headers) as r,
    ):
        return r.status, dict(r.headers), await r.read()


async def test_error_bodies_and_headers_pass_unchanged(
    make_gateway: GatewayFactory, mcp_url: str
) -> None:
    gateway = await mcp_gateway(make_gateway, mcp_url)
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "Mcp-Session-Id": "no-such-session",
        "MCP-Protocol-Version": "2025-11-25",
    }
    body = b'{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{}}'
    direct = await _post(mcp_url, body, headers)
    proxied = await _post(f"{gateway.url}/mcp/tools", body, headers)
    assert direct[0] >= 400 and proxied[0] == direct[0]
    assert proxied[2] == direct[2]
    assert proxied[1].get("Content-Type") == direct[1].get("Content-Type")


async def test_serve_with_the_mcp_flag_proxies_the_server(mcp_url: str, tmp_path: Any) -> None:
    database = f"sqlite:///{tmp_path}/served.db"
    async with serving(
        "--mcp", f"tools={mcp_url}?key=hidden-123", LOOPWATCH_DATABASE_URL=database
    ) as served:
        async with Client(f"{served.url}/mcp/tools", mode=LEGACY, cache=None) as client:
            result = await client.call_tool("read_text_file", {"path": "/served"})
        async with aiohttp.ClientSession() as http, http.get(f"{served.url}/api/mcp/servers") as r:
            servers = (await r.json())["servers"]
    assert result.content[0].text.startswith("contents of /served")  # type: ignore[union-attr]
    assert [(s["name"], s["url"]) for s in servers] == [("tools", mcp_url)]


@pytest.mark.parametrize("enforce", [False, True], ids=["observe", "enforce"])
@pytest.mark.parametrize(
    "arguments",
    [b'{"text": "caf\xe9"}', b'{"text": "half \xed\xa0\x80 a pair"}', b'{"text": "\\ud800"}'],
    ids=["latin1", "encoded-surrogate", "escaped-surrogate"],
)
async def test_a_body_that_is_not_unicode_json_is_a_json_rpc_parse_error(
    make_gateway: GatewayFactory, mcp_url: str, arguments: bytes, enforce: bool
) -> None:
    """Answered by the gateway, as a server would (HTTP 400, -32700): what it cannot read
    it can neither judge nor record."""
    gateway = await mcp_gateway(make_gateway, mcp_url, mcp_enforce=enforce)
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    call = b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":'
    status, _, body = await _post(f"{gateway.url}/mcp/tools", call + arguments + b"}}", headers)
    assert status == 400
    answer = json.loads(body)
    assert answer["id"] is None and answer["error"]["code"] == -32700
    assert answer["error"]["message"].startswith("Parse error: ")
    await flush(gateway)
    assert (await gateway.get("/api/mcp/executions"))["executions"] == []
