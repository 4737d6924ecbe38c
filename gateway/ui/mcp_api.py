"""The read API of the MCP side: servers with their tools and counts, unjoined executions,
and what a trace's JSON gains (its executions, on its tool calls too, and MCP violations)."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web
from sqlalchemy.engine import Engine
from yarl import URL

from gateway.errors import BadRequest
from gateway.store.read import mcp as reads
from gateway.ui.answer import json_answer
from gateway.ui.api_models.mcp import ExecutionList, ServerList
from gateway.ui.api_models.queries import MAX_LIMIT, whole
from gateway.ui.deps import ReadDeps


async def list_servers(request: web.Request, deps: ReadDeps) -> web.Response:
    configured = {server.name: _shown(server.url) for server in deps.settings.mcp_servers}
    found = await asyncio.to_thread(reads.servers, deps.engine, configured)
    return await json_answer(ServerList, {"servers": found})


async def list_executions(request: web.Request, deps: ReadDeps) -> web.Response:
    """The executions that joined no run, a page at a time (`cursor`, `next_cursor`)."""
    join = request.query.get("join") or None
    if join not in (None, "none", "ambiguous"):
        raise BadRequest("join must be none or ambiguous", param="join")
    limit = whole(request.query.get("limit", "50"), "limit", 1, MAX_LIMIT)
    cursor = request.query.get("cursor") or None
    try:
        found = await asyncio.to_thread(reads.unjoined, deps.engine, join, limit, cursor)
    except ValueError as exc:  # a malformed cursor
        raise BadRequest(str(exc), param="cursor") from None
    return await json_answer(ExecutionList, found)


def _shown(url: str) -> str:
    """A server's URL without what may be a credential (user info, query)."""
    return str(URL(url).with_user(None).with_query(None))


def add_executions(engine: Engine, trace: dict[str, Any]) -> dict[str, Any]:
    """The trace's `tool_executions`, each tool call's `executions`, and its MCP violations
    among `violations` (`source: "mcp"`). Blocking: call in a thread."""
    executions = reads.trace_executions(engine, trace["id"])
    by_call: dict[str, list[dict[str, Any]]] = {}
    for execution in executions:
        if execution["call_id"] is not None:
            by_call.setdefault(execution["call_id"], []).append(execution)
    for step in trace.get("steps", []):
        for item in step.get("output_items", []):
            if item.get("kind") == "tool_call":
                item["executions"] = by_call.get(item.get("call_id") or "", [])
    trace["tool_executions"] = executions
    trace.setdefault("violations", []).extend(reads.trace_violations(engine, trace["id"]))
    return trace
