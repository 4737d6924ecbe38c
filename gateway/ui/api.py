"""The JSON read API: traces, one trace with its steps, violations."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web

from gateway.deps import Deps
from gateway.errors import BadRequest, NotFound
from gateway.items import ViolationKind
from gateway.store import queries

MAX_LIMIT = 200


def _limit(request: web.Request) -> int:
    raw = request.query.get("limit", "50")
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_LIMIT:
        raise BadRequest(f"limit must be a whole number from 1 to {MAX_LIMIT}", param="limit")
    return int(raw)


def _violation_kind(request: web.Request) -> str | None:
    kind = request.query.get("violation") or request.query.get("kind")
    if kind and kind not in ViolationKind.__members__.values():
        raise BadRequest(f"unknown violation kind: {kind}", param="violation")
    return kind or None


async def list_traces(request: web.Request, deps: Deps) -> web.Response:
    result = await _read(
        queries.list_traces,
        deps,
        limit=_limit(request),
        cursor=request.query.get("cursor") or None,
        status=request.query.get("status") or None,
        model=request.query.get("model") or None,
        violation=_violation_kind(request),
    )
    return await _json(result)


async def get_trace(request: web.Request, deps: Deps) -> web.Response:
    trace = await _read(queries.get_trace, deps, request.match_info["trace_id"])
    if trace is None:
        raise NotFound(f"no trace {request.match_info['trace_id']}")
    return await _json(trace)


async def list_violations(request: web.Request, deps: Deps) -> web.Response:
    result = await _read(
        queries.list_violations,
        deps,
        limit=_limit(request),
        cursor=request.query.get("cursor") or None,
        kind=_violation_kind(request),
    )
    return await _json(result)


async def _read(function: Any, deps: Deps, *args: Any, **kwargs: Any) -> Any:
    try:
        return await asyncio.to_thread(function, deps.engine, *args, **kwargs)
    except ValueError as exc:  # a malformed cursor
        raise BadRequest(str(exc), param="cursor") from None


async def _json(result: Any) -> web.Response:
    """Serialized in a thread: a long trace must not hold up the streams being proxied."""
    text = await asyncio.to_thread(json.dumps, result)
    return web.Response(text=text, content_type="application/json")
