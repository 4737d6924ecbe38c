"""The OpenAPI document and the app agree: every /api route mounted is described, and
every route described is mounted, with the same method."""

from __future__ import annotations

import json

import pytest

from gateway.app import create_app
from gateway.config import Settings
from gateway.ui.mcp_server.streamable import PATH as MCP_PATH
from gateway.ui.openapi.routes import openapi_document
from tests.processes import serving

pytestmark = pytest.mark.sqlite


def test_the_document_lists_exactly_the_mounted_api_routes() -> None:
    app = create_app(Settings())
    mounted = {
        (route.method, route.resource.canonical)
        for route in app.router.routes()
        if route.resource is not None
        and route.resource.canonical.startswith("/api/")
        and route.method != "HEAD"  # aiohttp's own, beside each GET
        # The trace MCP server speaks JSON-RPC as the MCP specification describes it, not
        # this REST API: its own suites hold it (tests/e2e/mcp/test_trace_mcp_server.py).
        and route.resource.canonical != MCP_PATH
    }
    document = openapi_document(secured=False)
    described = {
        (method.upper(), path)
        for path, operations in document["paths"].items()
        for method in operations
    }
    assert mounted == described
    assert len(mounted) >= 8


async def test_an_open_gateway_serves_a_document_without_security(database_url: str) -> None:
    import aiohttp

    async with (
        serving(LOOPWATCH_DATABASE_URL=database_url) as gw,
        aiohttp.ClientSession() as session,
        session.get(gw.url + "/api/openapi.json") as r,
    ):
        assert r.status == 200 and r.content_type == "application/json"
        document = json.loads(await r.text())
    assert document["openapi"] == "3.1.0"
    assert "security" not in document  # loopback without a token: nothing to show
    assert all(
        "401" not in op["responses"] for ops in document["paths"].values() for op in ops.values()
    )
