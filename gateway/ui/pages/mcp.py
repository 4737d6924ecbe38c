"""The page of the MCP tool executions that joined no run: what no trace shows, their
violations and whether they reached the server, newest first, a page at a time."""

from __future__ import annotations

from aiohttp import web

from gateway.store.read import mcp as mcp_reads
from gateway.ui.deps import ReadDeps
from gateway.ui.pages.rendering import error_page, read, render, url

PATH = "/violations/unjoined"
PAGE_SIZE = 50
JOINS = {"none": "no model call matched", "ambiguous": "several model calls matched"}


async def unjoined_page(request: web.Request, deps: ReadDeps) -> web.Response:
    """`join` narrows to one reason; `at` starts the list at one execution (a violation's
    link), `cursor` at the next page."""
    join = request.query.get("join") or None
    join = join if join in JOINS else None
    cursor = request.query.get("cursor") or None
    at = request.query.get("at") or None
    try:
        page = await read(mcp_reads.unjoined, deps, join, PAGE_SIZE, cursor, at)
    except ValueError:
        return await error_page(request, deps, 400, "That page link is invalid.")
    return await render(
        request,
        deps,
        "unjoined.html",
        executions=page["executions"],
        join=join,
        joins=JOINS,
        cursor=cursor or at,
        has_next=page["next_cursor"] is not None,
        next_url=url(PATH, {"join": join, "cursor": page["next_cursor"]}),
        first_url=url(PATH, {"join": join}),
    )
