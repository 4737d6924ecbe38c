"""`POST /mcp/{name}/stdio`: what a `loopwatch mcp-stdio` bridge saw, one JSON line per
message (`{"from": "client"|"server", "line": ...}`), recorded as for HTTP."""

from __future__ import annotations

import re

from aiohttp import web

from gateway import jsoncodec
from gateway.mcp.messages import BRIDGE_HEADER
from gateway.mcp.requests import Context
from gateway.proxy.mcp.relay import METHOD_NOT_FOUND, context_of, rpc_error
from gateway.proxy.mcp.runtime import McpRuntime

NAME = re.compile(r"^[a-z0-9_-]{1,64}$")
MAX_BRIDGES = 1000  # bridges with requests in flight, oldest forgotten first


async def handle(request: web.Request, runtime: McpRuntime) -> web.StreamResponse:
    name = request.match_info["name"]
    if not NAME.match(name):
        body = rpc_error(None, METHOD_NOT_FOUND, f"{name!r} is not a valid MCP server name.")
        return web.json_response(body, status=404)
    bridge = request.headers.get(BRIDGE_HEADER, "")[:64]
    tracked = runtime.stdio.setdefault(bridge, {})
    runtime.stdio.move_to_end(bridge)
    while len(runtime.stdio) > MAX_BRIDGES:
        runtime.stdio.popitem(last=False)
    context = context_of(request, name)
    for raw in (await request.read()).splitlines():
        report = _report(raw)
        if report is None:
            continue
        sender, line = report
        if sender == "client":
            found, _ = runtime.begin(_with_session(context, bridge), line, can_refuse=False)
            tracked.update(found)
        else:
            messages = _messages(line)
            runtime.messages(tracked, messages, bridge or None)
    return web.Response(status=204)


def _with_session(context: Context, bridge: str) -> Context:
    """A stdio connection is one session: the bridge's id stands for it."""
    return Context(
        context.server,
        context.trace_header,
        context.traceparent,
        context.protocol_version,
        context.session_id or bridge or None,
    )


def _report(raw: bytes) -> tuple[str, bytes] | None:
    try:
        report = jsoncodec.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(report, dict) or not isinstance(report.get("line"), str):
        return None
    sender = "client" if report.get("from") == "client" else "server"
    return sender, report["line"].encode()


def _messages(line: bytes) -> list[dict[str, object]]:
    try:
        parsed = jsoncodec.loads(line)
    except (ValueError, RecursionError):
        return []
    found = parsed if isinstance(parsed, list) else [parsed]
    return [m for m in found if isinstance(m, dict)]
