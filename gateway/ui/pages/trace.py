"""The trace page, one step's page (or its body alone, loaded on demand) and the live feed.
Every trace page follows the feed: any trace can still grow (a completed chat gets another
turn, a refused run a retry), a running one is asked more often.

A long trace's page carries only its rows; step bodies come from the step URL, so the
first paint stays small. Views are cached by what changes when a trace grows.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections import OrderedDict
from typing import Any

from aiohttp import web

from gateway.store.read import queries, replays, trees
from gateway.ui import mcp_api
from gateway.ui.deps import ReadDeps
from gateway.ui.pages.lists import idle_seconds
from gateway.ui.pages.rendering import (
    TEMPLATES,
    error_page,
    html_response,
    read,
    render,
    render_text,
)
from gateway.ui.views.fork_compare import ForkCompare, fork_compare
from gateway.ui.views.present import TraceView, trace_view
from gateway.ui.views.shapes import Row, StepView

NOT_FOUND = "No trace has this id. It may not have been recorded yet."
CacheKey = tuple[Any, ...]


class ViewCache:
    """The last few trace views; a step body loaded on demand reuses its trace's view."""

    def __init__(self, size: int = 8) -> None:
        self._size = size
        self._views: OrderedDict[CacheKey, TraceView] = OrderedDict()

    def get(self, key: CacheKey) -> TraceView | None:
        view = self._views.get(key)
        if view is not None:
            self._views.move_to_end(key)
        return view

    def put(self, key: CacheKey, view: TraceView) -> None:
        self._views[key] = view
        self._views.move_to_end(key)
        while len(self._views) > self._size:
            self._views.popitem(last=False)


VIEWS = web.AppKey("loopwatch_trace_views", ViewCache)


def _key(trace: dict[str, Any]) -> CacheKey:
    return (
        trace["id"],
        trace.get("updated_at"),
        trace.get("step_count"),
        trace.get("violation_count"),
        trace.get("status"),
        trace.get("made_from"),
    )


async def _view(request: web.Request, deps: ReadDeps, *, cached: bool) -> TraceView | None:
    """The trace's view; a cached one while the trace is unchanged and not running (a running
    trace's view depends on the time: its open calls reach to now)."""
    trace_id = request.match_info["trace_id"]
    cache = request.app[VIEWS]
    if cached:
        summary = await read(replays.page_key, deps, trace_id, **_at(deps))
        if summary is None:
            return None
        view = cache.get(_key(summary))
        if view is not None and not view.running:
            return view
    at = _at(deps)
    trace = await read(queries.get_trace, deps, trace_id, **at)
    if trace is None:
        return None
    trace = await asyncio.to_thread(mcp_api.add_executions, deps.engine, trace)
    if trace.get("depth", 0) >= 2:  # breadcrumbs through every run above it
        trace["ancestors"] = await read(trees.ancestors, deps, trace_id)
    view = await asyncio.to_thread(
        trace_view, trace, now=at["now"], idle_seconds=at["idle_seconds"]
    )
    trace["made_from"] = len(trace.get("replays", ())) + len(trace.get("forks", ()))
    cache.put(_key(trace), view)
    return view


def _at(deps: ReadDeps) -> dict[str, Any]:
    """The time and idle window a trace is read at: the same as the read API and the list
    use, so a page never shows `running` where they say `abandoned`."""
    return {"now": deps.clock(), "idle_seconds": idle_seconds(deps)}


async def trace_page(request: web.Request, deps: ReadDeps) -> web.Response:
    view = await _view(request, deps, cached=True)
    if view is None:
        return await error_page(request, deps, 404, NOT_FOUND)
    auth = deps.settings.admin_token is not None
    html = view.pages.get(auth)
    if html is None:
        compare = await _fork_compare(deps, view)
        html = await render_text(request, deps, "trace.html", view=view, compare=compare)
        if not view.running:  # the same bytes until the trace changes
            view.pages[auth] = html
    return html_response(html)


async def _fork_compare(deps: ReadDeps, view: TraceView) -> ForkCompare | None:
    """A fork's trace beside the step it forked, read from the original trace."""
    trace = view.trace
    if trace.get("fork_of") is None or trace.get("fork_at") is None:
        return None
    at = int(trace["fork_at"])
    original = await read(
        queries.get_trace, deps, trace["fork_of"], steps_after=at - 1, steps_limit=1
    )
    steps = [s for s in (original or {}).get("steps", []) if s["seq"] == at]
    first = await read(queries.get_trace, deps, trace["id"], steps_limit=1)
    return fork_compare(first or trace, steps[0] if steps else None)


async def step_page(request: web.Request, deps: ReadDeps) -> web.Response:
    """The step on a page of its own, with ?part=body only its body (for the trace page),
    with ?part=raw its raw record."""
    view = await _view(request, deps, cached=True)
    step = view.steps.get(request.match_info["step_id"]) if view else None
    if view is None or step is None:
        message = NOT_FOUND if view is None else "This trace has no step with this id."
        return await error_page(request, deps, 404, message)
    if request.query.get("part") == "body":
        return await render(request, deps, "step_part.html", s=step, view=view)
    if request.query.get("part") == "raw":  # its request and response as stored
        return await render(request, deps, "step_raw.html", s=step, view=view)
    seqs = sorted(view.steps.values(), key=lambda s: s.seq)
    index = seqs.index(step)
    return await render(
        request,
        deps,
        "step.html",
        s=step,
        view=view,
        previous=seqs[index - 1] if index else None,
        next=seqs[index + 1] if index + 1 < len(seqs) else None,
    )


async def live(request: web.Request, deps: ReadDeps) -> web.Response:
    """What changed since the page's last look: its header and the rows that moved.

    `after` is the last step number the page has, `known` the trace's updated_at it saw.
    """
    raw = request.query.get("after", "0")
    after = int(raw) if raw.isdigit() else 0
    trace_id = request.match_info["trace_id"]
    summary = await read(queries.get_trace_summary, deps, trace_id, **_at(deps))
    if summary is None:
        raise web.HTTPNotFound()
    # A status the page did not show is a change too: a run going idle changes no row.
    unchanged = summary["updated_at"] == request.query.get("known") and summary[
        "status"
    ] == request.query.get("status", summary["status"])
    if unchanged and summary["step_count"] == after:
        return _json({"changed": False})
    view = await _view(request, deps, cached=False)
    if view is None:
        raise web.HTTPNotFound()
    body = await asyncio.to_thread(_changes, request.app[TEMPLATES], view, after)
    return _json(body)


def _changes(templates: Any, view: TraceView, after: int) -> dict[str, Any]:
    fresh = [s for s in view.steps.values() if s.seq > after]
    since = min((s.offset_ms for s in fresh), default=view.span_ms)
    moved = [row for row in view.rows if _touches(row, since)]
    row_template = templates.get_template("row_part.html")
    top = templates.get_template("top_part.html").render(view=view)
    steps = [s for s in view.rows if isinstance(s, StepView)]
    return {
        "changed": True,
        "running": view.running,
        "status": view.trace.get("status"),
        "known": view.trace.get("updated_at"),
        "after": max((s.seq for s in steps), default=0),
        "span": math.ceil(view.span_ms),  # the rows' view box, as the page draws it
        "top": top,
        "elapsed": view.header.duration,
        "rows": [{"id": r.anchor, "html": row_template.render(r=r, view=view)} for r in moved],
    }


def _touches(row: Row, since: float) -> bool:
    """A row is new, or one of its bars reaches the new steps (tool spans they answer)."""
    if row.offset_ms >= since:
        return True
    tools = [span for span in row.spans if span.kind in ("tool", "open", "unanswered")]
    return any(span.start + span.width >= since - 0.5 for span in tools)


def _json(body: dict[str, Any]) -> web.Response:
    return web.Response(text=json.dumps(body), content_type="application/json")
