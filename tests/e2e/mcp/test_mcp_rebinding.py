"""`/mcp/{name}` as a local MCP server must be (MCP transports, security warning): a request
naming another site in `Host` and `Origin` is refused with a JSON-RPC error, the gateway's
own address is served, as the MCP conformance scenario `dns-rebinding-protection` checks."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest

from tests.e2e.mcp.mcp_harness import mcp_gateway, mcp_url  # noqa: F401
from tests.harness import GatewayFactory, make_gateway, provider  # noqa: F401

pytestmark = pytest.mark.sqlite

VERSION = "2025-11-25"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": VERSION,
        "capabilities": {},
        "clientInfo": {"name": "rebinding-test", "version": "1.0.0"},
    },
}


async def _post(url: str, body: dict[str, Any], site: str, **headers: str) -> Any:
    sent = {
        "Host": site,
        "Origin": f"http://{site}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": VERSION,
        **headers,
    }
    async with aiohttp.ClientSession() as session, session.post(url, json=body, headers=sent) as r:
        return r.status, r.headers.get("Mcp-Session-Id"), await r.read()


async def test_a_rebound_name_is_a_json_rpc_403(make_gateway: GatewayFactory, mcp_url: str) -> None:
    gateway = await mcp_gateway(make_gateway, mcp_url)
    status, session, body = await _post(f"{gateway.url}/mcp/tools", INITIALIZE, "evil.example.com")
    assert status == 403 and session is None  # never reached the server
    answer = json.loads(body)
    assert answer["jsonrpc"] == "2.0" and answer["id"] is None
    assert answer["error"]["data"] == {"rule": "host_not_allowed"}
    assert "evil.example.com" in answer["error"]["message"]


async def test_the_gateways_own_address_is_served(
    make_gateway: GatewayFactory, mcp_url: str
) -> None:
    gateway = await mcp_gateway(make_gateway, mcp_url)
    url, site = f"{gateway.url}/mcp/tools", gateway.url.removeprefix("http://")
    status, session, _ = await _post(url, INITIALIZE, site)
    assert status == 200 and session
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    status, _, _ = await _post(url, initialized, site, **{"Mcp-Session-Id": session})
    assert status == 202
