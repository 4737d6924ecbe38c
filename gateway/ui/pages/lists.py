"""The traces list (filters, sort orders, search) and the sessions list."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from aiohttp import web

from gateway.runs.status import DEFAULT_IDLE_SECONDS
from gateway.store.read import listing, queries
from gateway.store.read import sessions as session_list
from gateway.store.read.deadline import ReadTimedOut
from gateway.ui.deps import ReadDeps
from gateway.ui.pages.rendering import VIOLATION_KINDS, error_page, read, render, url
from gateway.ui.views import status as statuses
from gateway.ui.views.present import step_anchor, trace_href
from gateway.ui.views.rows import session_row, trace_row

PAGE_SIZE = 50
RANGES = {
    "15m": (timedelta(minutes=15), "last 15 minutes"),
    "1h": (timedelta(hours=1), "last hour"),
    "24h": (timedelta(days=1), "last 24 hours"),
    "7d": (timedelta(days=7), "last 7 days"),
}
SORT_LABELS = {"time": "newest", "duration": "longest", "steps": "most steps", "cost": "costliest"}
FILTER_KEYS = (
    "status",
    "model",
    "violation",
    "any_violation",
    "session",
    "range",
    "since",
    "until",
    "children",
)


@dataclass(frozen=True, slots=True)
class ListQuery:
    """The list page's query string, checked: unknown values are dropped, not errors."""

    params: dict[str, str | None]  # what the page's links carry on
    since: datetime | None
    until: datetime | None
    sort: str

    @property
    def filtered(self) -> bool:
        return any(self.params.get(key) for key in FILTER_KEYS)


def idle_seconds(deps: ReadDeps) -> float:
    value = getattr(deps.settings, "trace_idle_seconds", None)
    return float(value) if isinstance(value, int | float) else DEFAULT_IDLE_SECONDS


def _time(value: str | None) -> datetime | None:
    """An RFC 3339 time, or a browser's datetime-local (read as UTC)."""
    if not value:
        return None
    try:
        when = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def list_query(request: web.Request, now: datetime) -> ListQuery:
    query = request.query
    kind = query.get("violation") or None
    when = query.get("range") or None
    sort = query.get("sort") or "time"
    since, until = _time(query.get("since")), _time(query.get("until"))
    if when in RANGES:
        since = now - RANGES[when][0]
    params: dict[str, str | None] = {
        "status": query.get("status") if query.get("status") in statuses.STATUSES else None,
        "model": (query.get("model") or "").strip() or None,
        "violation": kind if kind in VIOLATION_KINDS else None,
        "any_violation": "1" if query.get("any_violation") == "1" else None,
        "session": (query.get("session") or "").strip() or None,
        "range": when if when in RANGES else None,
        "since": query.get("since") if _time(query.get("since")) else None,
        "until": query.get("until") if until else None,
        "sort": sort if sort in listing.sorts() and sort != "time" else None,
        "children": "1" if query.get("children") == "1" else None,  # sub-agents' runs too
    }
    return ListQuery(params, since, until, sort if sort in listing.sorts() else "time")


def _store_filters(q: ListQuery) -> dict[str, Any]:
    status = q.params["status"]
    return {
        "status": status or None,
        "model": q.params["model"],
        "violation": q.params["violation"],
        "has_violations": True if q.params["any_violation"] else None,
        "session": q.params["session"],
        "since": q.since,
        "until": q.until,
        "include_children": True if q.params["children"] else None,
        "sort": q.sort,
    }


def _supported(function: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The arguments `function` takes: the store gains search before or after this page."""
    accepted = inspect.signature(function).parameters
    return {key: value for key, value in kwargs.items() if key in accepted}


def _list_page(engine: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    page: dict[str, Any] = queries.list_traces(engine, **_supported(queries.list_traces, kwargs))
    extras = listing.trace_extras(engine, [t["id"] for t in page["traces"]])
    for trace in page["traces"]:
        for key, value in extras[trace["id"]].items():
            trace.setdefault(key, value)
    return page


def _locate(engine: Any, text: str, exact_only: bool) -> str | None:
    """Where a search for an id should go: a trace, or the step that recorded it."""
    if queries.get_trace_summary(engine, text) is not None:
        return trace_href(text)
    hit = queries.find_step(engine, text)
    if hit is None and not exact_only:
        hit = listing.find_prefix(engine, text)
    if hit is None:
        return None
    anchor = f"#{step_anchor(hit['step_id'])}" if hit.get("step_id") else ""
    return trace_href(hit["trace_id"]) + anchor


async def traces_page(request: web.Request, deps: ReadDeps) -> web.Response:
    now = deps.clock()
    search = request.query.get("q", "").strip()
    searchable = "q" in inspect.signature(queries.list_traces).parameters
    if search:
        target = await read(_locate, deps, search, searchable)
        if target is not None:
            raise web.HTTPFound(target)
    q = list_query(request, now)
    kwargs = _list_arguments(request, deps, q, now, search if searchable else "")
    try:
        page = await read(_list_page, deps, kwargs)
    except ValueError:
        return await error_page(request, deps, 400, "That page link is invalid.")
    except ReadTimedOut:
        message = "The search took too long and was stopped. Try more specific words."
        return await error_page(request, deps, 503, message)
    found = page["traces"]
    if search and len(found) == 1 and found[0]["id"].startswith(search):
        raise web.HTTPFound(trace_href(found[0]["id"]))  # the one trace that id begins
    idle = idle_seconds(deps)
    rows = [trace_row(t, now=now, idle_seconds=idle) for t in page["traces"]]
    links = {**q.params, "q": search or None}
    return await render(
        request,
        deps,
        "traces.html",
        rows=rows,
        query=q,
        search=search,
        searchable=searchable,
        statuses=[(s, statuses.label(s)) for s in statuses.STATUSES],
        ranges={key: label for key, (_, label) in RANGES.items()},
        sorts={key: SORT_LABELS[key] for key in listing.sorts()},
        sort_url=lambda sort: url("/", {**links, "sort": None if sort == "time" else sort}),
        cursor=kwargs["cursor"],
        next_url=url(
            "/", {**links, "limit": request.query.get("limit"), "cursor": page["next_cursor"]}
        ),
        has_next=page["next_cursor"] is not None,
        first_url=url("/", links),
        clear_search_url=url("/", {**q.params}),
        live=q.sort == "time" and not kwargs["cursor"] and not search,
        models=sorted({m for row in rows for m in row.models}),
        base_url=f"http://{request.host}",
    )


def _list_arguments(
    request: web.Request, deps: ReadDeps, q: ListQuery, now: datetime, search: str
) -> dict[str, Any]:
    """The store's list_traces arguments for this page's query, cursor and search."""
    kwargs = {**_store_filters(q), "limit": _page_size(request), "now": now}
    kwargs["idle_seconds"] = idle_seconds(deps)
    kwargs["search_timeout"] = deps.settings.search_timeout_s
    kwargs["cursor"] = request.query.get("cursor") or None
    if search:
        kwargs["q"] = search
    return kwargs


def _page_size(request: web.Request) -> int:
    raw = request.query.get("limit", "")
    return int(raw) if raw.isdigit() and 1 <= int(raw) <= queries.MAX_LIMIT else PAGE_SIZE


async def sessions_page(request: web.Request, deps: ReadDeps) -> web.Response:
    sessions = await read(session_list.session_summaries, deps, limit=200)
    return await render(request, deps, "sessions.html", sessions=[session_row(s) for s in sessions])
