"""The JSON read API: traces (filtered), one trace with its steps, violations, sessions."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from importlib import metadata
from typing import Any

from aiohttp import web

from gateway.errors import BadRequest, NotFound, SearchTimedOut
from gateway.runs.status import TraceStatus
from gateway.store.read import queries
from gateway.store.read import sessions as session_list
from gateway.store.read.deadline import ReadTimedOut
from gateway.store.read.filters import TraceFilters
from gateway.ui import cassette, mcp_api
from gateway.ui.answer import json_answer
from gateway.ui.api_models.cassette import CassetteLine
from gateway.ui.api_models.queries import (
    KINDS,
    MAX_LIMIT,
    MAX_SEQ,
    MAX_STEPS_LIMIT,
    STEPS_LIMIT,
    whole,
)
from gateway.ui.api_models.sessions import SessionList
from gateway.ui.api_models.traces import TraceDetail, TraceList
from gateway.ui.api_models.violations import ViolationList
from gateway.ui.deps import ReadDeps


def _whole(request: web.Request, name: str, default: int, low: int, high: int) -> int:
    return whole(request.query.get(name, str(default)), name, low, high)


def _limit(request: web.Request) -> int:
    return _whole(request, "limit", 50, 1, MAX_LIMIT)


def _violation_kind(request: web.Request) -> str | None:
    kind = request.query.get("violation") or request.query.get("kind")
    if kind and kind not in KINDS:
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
        # In UTC, as the store compares: an offset may carry it past year 1 or 9999.
        return (when if when.tzinfo else when.replace(tzinfo=UTC)).astimezone(UTC)
    except (ValueError, OverflowError):
        raise BadRequest(f"{name} must be an RFC 3339 time", param=name) from None


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
    return await json_answer(TraceList, result)


async def list_sessions(request: web.Request, deps: ReadDeps) -> web.Response:
    result = await _read(
        session_list.sessions_page,
        deps,
        limit=_limit(request),
        cursor=request.query.get("cursor") or None,
    )
    return await json_answer(SessionList, result)


async def get_trace(request: web.Request, deps: ReadDeps) -> web.Response:
    trace = await _read(
        queries.get_trace,
        deps,
        request.match_info["trace_id"],
        now=deps.clock(),
        idle_seconds=deps.settings.trace_idle_seconds,
        steps_after=_whole(request, "steps_after", 0, 0, MAX_SEQ),
        steps_limit=_whole(request, "steps_limit", STEPS_LIMIT, 1, MAX_STEPS_LIMIT),
    )
    if trace is None:
        raise NotFound(f"no trace {request.match_info['trace_id']}")
    trace = await asyncio.to_thread(mcp_api.add_executions, deps.engine, trace)
    return await json_answer(TraceDetail, trace)


async def get_cassette(request: web.Request, deps: ReadDeps) -> web.Response:
    """The trace as a cassette (JSON Lines): `gateway.ui.cassette`."""
    trace_id = request.match_info["trace_id"]
    lines = await _read(cassette.cassette_lines, deps, trace_id, version())
    if lines is None:
        raise NotFound(f"no trace {trace_id}")
    await asyncio.to_thread(_checked, lines)
    return web.Response(text="".join(line + "\n" for line in lines), content_type=JSONL)


JSONL = "application/jsonl"


def _checked(lines: list[str]) -> None:
    """Each line read by its model (gateway.ui.api_models.cassette); written as it is."""
    for line in lines:
        CassetteLine.model_validate_json(line)


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
        trace_id=request.query.get("trace_id") or None,
    )
    return await json_answer(ViolationList, result)


async def _read(function: Any, deps: ReadDeps, *args: Any, **kwargs: Any) -> Any:
    try:
        return await asyncio.to_thread(function, deps.engine, *args, **kwargs)
    except ValueError as exc:  # a malformed cursor
        raise BadRequest(str(exc), param="cursor") from None
    except ReadTimedOut as exc:
        raise SearchTimedOut(str(exc), param="q") from None
