"""The demo's built-in MCP server: a small read-only document store over Streamable HTTP
(JSON answers), so the demo shows a tool executed through `/mcp/docs` with no install."""

from __future__ import annotations

import uuid
from typing import Any

from aiohttp import web

PROTOCOL = "2025-11-25"
DOCUMENTS = {
    "/srv/docs/RELEASE.md": (
        "# Release 2.4\n"
        "- Checkout retries payment timeouts once before failing.\n"
        "- Refunds over 500 EUR need a second approver.\n"
        "- The mobile app drops support for Android 9."
    ),
}
TOOLS = [
    {
        "name": "read_text_file",
        "description": "Read a text document of the team's docs by its path.",
        "inputSchema": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
            "additionalProperties": False,
        },
    }
]


def make_app() -> web.Application:
    app = web.Application()
    app.router.add_post("/mcp", _handle)
    return app


async def _handle(request: web.Request) -> web.StreamResponse:
    message = await request.json()
    method, rpc_id = message.get("method"), message.get("id")
    if rpc_id is None:  # a notification
        return web.Response(status=202)
    headers: dict[str, str] = {}
    if method == "initialize":
        headers["Mcp-Session-Id"] = uuid.uuid4().hex
        result: dict[str, Any] = {
            "protocolVersion": PROTOCOL,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "loopwatch-demo-docs", "version": "1"},
        }
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call":
        result = _call(message.get("params") or {})
    elif method == "ping":
        result = {}
    else:
        error = {"code": -32601, "message": f"Method not found: {method}"}
        return web.json_response({"jsonrpc": "2.0", "id": rpc_id, "error": error})
    return web.json_response({"jsonrpc": "2.0", "id": rpc_id, "result": result}, headers=headers)


def _call(params: dict[str, Any]) -> dict[str, Any]:
    path = (params.get("arguments") or {}).get("path")
    text = DOCUMENTS.get(path) if isinstance(path, str) else None
    if params.get("name") != "read_text_file" or text is None:
        return {"content": [{"type": "text", "text": f"No document at {path!r}."}], "isError": True}
    return {"content": [{"type": "text", "text": text}], "isError": False}
