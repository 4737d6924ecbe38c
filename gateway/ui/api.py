"""The JSON read API: traces (filtered), one trace with its steps, violations, sessions."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import UTC, datetime
from importlib import metadata
from typing import Any

from aiohttp import web

from gateway.errors import BadRequest, NotFound, SearchTimedOut
from gateway.items import ViolationKind
from gateway.mcp.checks import KINDS as MCP_KINDS
from gateway.runs.status import TraceStatus
from gateway.store.read import queries
from gateway.store.read import sessions as session_list
from gateway.store.read.deadline import ReadTimedOut
from gateway.store.read.filters import TraceFilters
from gateway.ui import cassette, mcp_api
from gateway.ui.deps import ReadDeps

MAX_LIMIT = 200
STEPS_LIMIT = 100  # steps in one answer of GET /api/traces/{id}, unless asked otherwise
MAX_STEPS_LIMIT = 500


def _whole(request: web.Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query.get(name, str(default))
    if not raw.isdigit() or not low <= int(raw) <= high:
        raise BadRequest(f"{name} must be a whole number from {low} to {high}", param=name)
    return int(raw)


def _limit(request: web.Request) -> int:
    return _whole(request, "limit", 50, 1, MAX_LIMIT)


def _violation_kind(request: web.Request) -> str | None:
    kind = request.query.get("violation") or request.query.get("kind")
    if kind and kind not in ViolationKind.__members__.values() and kind not in MCP_KINDS:
        raise BadRequest(f"unknown violation kind: {kind}", param="violation")
    return kind or None


def _status(request: web.Request) -> str | None:
    status = request.query.get("status") or None
    if status is not None and status not in TraceStatus.__members__.values():
        known = ", ".join(s.value for s in TraceStatus)
        raise BadRequest(f"status must be one of {known}", param="status")
    return status


def _flag(request: web.Request, name: str) -> bool | None:
    raw = request.query.get(name) or None
    if raw is None:
        return None
    if raw not in ("true", "false"):
        raise BadRequest(f"{name} must be true or false", param=name)
    return raw == "true"


def _time(request: web.Request, name: str) -> datetime | None:
    """An RFC 3339 time; one without an offset is taken as UTC."""
    raw = (request.query.get(name) or "").strip()
    if not raw:
        return None
    if "T" in raw.upper():
        raw = raw.replace(" ", "+")  # an unescaped `+` of the offset arrives as a space
    try:
        when = datetime.fromisoformat(raw)
    except ValueError:
        raise BadRequest(f"{name} must be an RFC 3339 time", param=name) from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _filters(request: web.Request) -> TraceFilters:
    query = request.query
    return TraceFilters(
        status=_status(request),
        model=(query.get("model") or "").strip() or None,
        violation=_violation_kind(request),
        has_violations=_flag(request, "has_violations"),
        session=query.get("session") or None,
        since=_time(request, "since"),
        until=_time(request, "until"),
        q=(query.get("q") or "").strip() or None,
        include_children=_flag(request, "include_children"),
    )


async def list_traces(request: web.Request, deps: ReadDeps) -> web.Response:
    result = await _read(
        queries.list_traces,
        deps,
        limit=_limit(request),
        cursor=request.query.get("cursor") or None,
        filters=_filters(request),
        now=deps.clock(),
        idle_seconds=deps.settings.trace_idle_seconds,
        search_timeout=deps.settings.search_timeout_s,
    )
    return await _json(result)


async def list_sessions(request: web.Request, deps: ReadDeps) -> web.Response:
    result = await _read(
        session_list.sessions_page,
        deps,
        limit=_limit(request),
        cursor=request.query.get("cursor") or None,
    )
    return await _json(result)


async def get_trace(request: web.Request, deps: ReadDeps) -> web.Response:
    trace = await _read(
        queries.get_trace,
        deps,
        request.match_info["trace_id"],
        now=deps.clock(),
        idle_seconds=deps.settings.trace_idle_seconds,
        steps_after=_whole(request, "steps_after", 0, 0, 2**31 - 1),
        steps_limit=_whole(request, "steps_limit", STEPS_LIMIT, 1, MAX_STEPS_LIMIT),
    )
    if trace is None:
        raise NotFound(f"no trace {request.match_info['trace_id']}")
    trace = await asyncio.to_thread(mcp_api.add_executions, deps.engine, trace)
    return await _json(trace)


def add_routes(app: web.Application, with_deps: Callable[[Any], Any]) -> None:
    """Mount the read API's trace, violation and session routes."""
    app.router.add_get("/api/traces", with_deps(list_traces))
    app.router.add_get("/api/traces/{trace_id}", with_deps(get_trace))
    app.router.add_get("/api/traces/{trace_id}/cassette", with_deps(get_cassette))
    app.router.add_get("/api/violations", with_deps(list_violations))
    app.router.add_get("/api/sessions", with_deps(list_sessions))


async def get_cassette(request: web.Request, deps: ReadDeps) -> web.Response:
    """The trace as a cassette (JSON Lines): `gateway.ui.cassette`."""
    trace_id = request.match_info["trace_id"]
    lines = await _read(cassette.cassette_lines, deps, trace_id, version())
    if lines is None:
        raise NotFound(f"no trace {trace_id}")
    return web.Response(text="".join(line + "\n" for line in lines), content_type=JSONL)


JSONL = "application/jsonl"


def version() -> str:
    """The installed distribution's version, as `loopwatch --version` says it."""
    try:
        return metadata.version("loopwatch")
    except metadata.PackageNotFoundError:  # a source tree on sys.path, never installed
        return "unknown"


async def list_violations(request: web.Request, deps: ReadDeps) -> web.Response:
    result = await _read(
        queries.list_violations,
        deps,
        limit=_limit(request),
        cursor=request.query.get("cursor") or None,
        kind=_violation_kind(request),
    )
    return await _json(result)


async def _read(function: Any, deps: ReadDeps, *args: Any, **kwargs: Any) -> Any:
    try:
        return await asyncio.to_thread(function, deps.engine, *args, **kwargs)
    except ValueError as exc:  # a malformed cursor
        raise BadRequest(str(exc), param="cursor") from None
    except ReadTimedOut as exc:
        raise SearchTimedOut(str(exc), param="q") from None


async def _json(result: Any) -> web.Response:
    """Serialized in a thread: a long trace must not hold up the streams being proxied."""
    text = await asyncio.to_thread(json.dumps, result)
    return web.Response(text=text, content_type="application/json")
