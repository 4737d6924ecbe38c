"""`/api/mcp/traces`: the trace tools over Streamable HTTP. Stateless: every POST is answered
on its own (JSON, or one SSE event for a client that accepts only a stream), no session id,
no server-sent stream (GET and DELETE: 405). The admin token rule of `/api/` applies."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from aiohttp import web

from gateway.ui import api
from gateway.ui.deps import ReadDeps
from gateway.ui.mcp_server import answers
from gateway.ui.mcp_server.rpc import PARSE_ERROR, VERSIONS, Dispatcher, error

PATH = "/api/mcp/traces"
VERSION_HEADER = "MCP-Protocol-Version"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def add_routes(app: web.Application, with_deps: Callable[[Any], Handler]) -> None:
    """This server's one path (the MCP side's read API is in the read API's route table)."""
    app.router.add_route("*", PATH, with_deps(partial(handle, server_version=api.version())))


def reader(deps: ReadDeps) -> answers.Reader:
    settings = deps.settings
    return answers.Reader(
        deps.engine, settings.trace_idle_seconds, settings.search_timeout_s, deps.clock
    )


async def handle(request: web.Request, deps: ReadDeps, server_version: str) -> web.StreamResponse:
    if request.method != "POST":
        raise web.HTTPMethodNotAllowed(request.method, ["POST"])
    version = request.headers.get(VERSION_HEADER)
    if version is not None and version not in VERSIONS:
        body = error(None, -32600, f"unsupported {VERSION_HEADER}: {version}")
        return web.json_response(body, status=400)
    try:
        message = json.loads(await request.read())
    except (ValueError, UnicodeDecodeError):
        return web.json_response(error(None, PARSE_ERROR, "the body is not JSON"), status=400)
    read = reader(deps)

    async def run(name: str, arguments: dict[str, Any]) -> answers.Answer:
        return await asyncio.to_thread(answers.TOOLS[name], read, arguments)

    dispatcher = Dispatcher(run, server_version, version)
    if isinstance(message, list):  # a batch (2025-03-26)
        found = [await dispatcher.answer(m) for m in message]
        answered: Any = [a for a in found if a is not None] or None
    else:
        answered = await dispatcher.answer(message)
    if answered is None:
        return web.Response(status=202)
    text = await asyncio.to_thread(json.dumps, answered)
    if _stream_only(request):
        return web.Response(
            text=f"event: message\ndata: {text}\n\n", content_type="text/event-stream"
        )
    return web.Response(text=text, content_type="application/json")


def _stream_only(request: web.Request) -> bool:
    accept = request.headers.get("Accept", "")
    return "text/event-stream" in accept and "application/json" not in accept
