"""Queries of the MCP tables for the read API: executions, servers, tool lists, violations."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine, RowMapping

from gateway.store.mcp_tables import MCP_EXECUTIONS, MCP_METHODS, MCP_TOOLS, MCP_VIOLATIONS
from gateway.store.read.queries import page, reading
from gateway.store.read.shapes import iso
from gateway.store.read.shapes import mcp_violation_json as violation_json

MAX_EXECUTIONS = 1000  # of one trace, newest kept
CHUNK = 500  # ids in one IN (...)


def execution_json(row: RowMapping) -> dict[str, Any]:
    return {
        "id": row["id"],
        "call_id": row["call_id"],
        "trace_id": row["trace_id"],
        "join": row["join"],
        "server": row["server"],
        "tool": row["tool"],
        "arguments": row["arguments"],
        "result": row["result"],
        "is_error": row["is_error"],
        "error": row["error"],
        "outcome": row["outcome"],
        "duration_ms": row["duration_ms"],
        "protocol_version": row["protocol_version"],
        "delivery": row["delivery"],
        "started_at": iso(row["started_at"]),
    }


def trace_executions(engine: Engine, trace_id: str) -> list[dict[str, Any]]:
    with reading(engine) as conn:
        rows = conn.execute(
            sa.select(MCP_EXECUTIONS)
            .where(MCP_EXECUTIONS.c.trace_id == trace_id)
            .order_by(MCP_EXECUTIONS.c.started_at, MCP_EXECUTIONS.c.id)
            .limit(MAX_EXECUTIONS)
        ).mappings()
        return _judged(conn, [execution_json(row) for row in rows])


def _judged(conn: Connection, executions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each execution with the kinds of its violations and whether it `escaped`: it broke a
    rule and still reached the server (observed, not refused)."""
    kinds: dict[str, list[str]] = {execution["id"]: [] for execution in executions}
    v = MCP_VIOLATIONS.c
    for start in range(0, len(executions), CHUNK):
        ids = [e["id"] for e in executions[start : start + CHUNK]]
        query = sa.select(v.execution_id, v.kind).where(v.execution_id.in_(ids))
        for execution_id, kind in conn.execute(query.order_by(v.created_at, v.id)).all():
            if kind not in kinds[execution_id]:
                kinds[execution_id].append(kind)
    for execution in executions:
        execution["violation_kinds"] = kinds[execution["id"]]
        execution["escaped"] = bool(kinds[execution["id"]]) and execution["outcome"] != "refused"
    return executions


def trace_violations(engine: Engine, trace_id: str) -> list[dict[str, Any]]:
    """MCP violations recorded on the trace, and those of its executions joined later."""
    joined = sa.select(MCP_EXECUTIONS.c.id).where(MCP_EXECUTIONS.c.trace_id == trace_id)
    with reading(engine) as conn:
        rows = conn.execute(
            sa.select(MCP_VIOLATIONS)
            .where(
                (MCP_VIOLATIONS.c.trace_id == trace_id) | MCP_VIOLATIONS.c.execution_id.in_(joined)
            )
            .order_by(MCP_VIOLATIONS.c.created_at, MCP_VIOLATIONS.c.id)
        ).mappings()
        return [{**violation_json(row), "trace_id": trace_id} for row in rows]


def unjoined(
    engine: Engine,
    join: str | None,
    limit: int,
    cursor: str | None = None,
    at: str | None = None,
) -> dict[str, Any]:
    """A page of the executions that joined no trace, newest first (`join`: none or
    ambiguous, or both), from `cursor`, or from the execution `at` on (itself included),
    with their violations; ValueError for a cursor that is not one."""
    e = MCP_EXECUTIONS.c
    wanted = (join,) if join else ("none", "ambiguous")
    query = sa.select(MCP_EXECUTIONS).where(e.join.in_(wanted), e.trace_id.is_(None))
    with reading(engine) as conn:
        if at is not None and not cursor:
            query = query.where(_from(conn, at))
        rows, next_cursor = page(conn, query, (e.started_at, e.id), limit, cursor)
        executions = _judged(conn, [execution_json(row) for row in rows])
    return {"executions": executions, "next_cursor": next_cursor}


def _from(conn: Connection, execution_id: str) -> sa.ColumnElement[bool]:
    """This execution and those listed after it (older); all of them when it is gone (a
    retention pass took it, or it joined a run since)."""
    e = MCP_EXECUTIONS.c
    when = conn.scalar(sa.select(e.started_at).where(e.id == execution_id))
    if when is None:
        return sa.true()
    return sa.or_(e.started_at < when, sa.and_(e.started_at == when, e.id <= execution_id))


def tool_lists(engine: Engine) -> dict[str, dict[str, dict[str, Any]]]:
    with reading(engine) as conn:
        rows = conn.execute(sa.select(MCP_TOOLS.c.server, MCP_TOOLS.c.tools)).all()
    return {
        server: {t["name"]: t for t in tools if isinstance(t, dict) and "name" in t}
        for server, tools in rows
        if isinstance(tools, list)
    }


def servers(engine: Engine, configured: dict[str, str]) -> list[dict[str, Any]]:
    """Each configured (or once seen) server: its tools as last listed and its call counts."""
    with reading(engine) as conn:
        lists = {r.server: r for r in conn.execute(sa.select(MCP_TOOLS)).all()}
        calls = conn.execute(
            sa.select(MCP_EXECUTIONS.c.server, MCP_EXECUTIONS.c.outcome, sa.func.count()).group_by(
                MCP_EXECUTIONS.c.server, MCP_EXECUTIONS.c.outcome
            )
        ).all()
        methods = conn.execute(
            sa.select(MCP_METHODS.c.server, sa.func.count()).group_by(MCP_METHODS.c.server)
        ).all()
    counts: dict[str, dict[str, int]] = {}
    for server, outcome, count in calls:
        counts.setdefault(server, {})[outcome or "pending"] = count
    other: dict[str, int] = {server: count for server, count in methods}
    names = sorted(set(configured) | set(lists) | set(counts))
    return [
        {
            "name": name,
            "url": configured.get(name),
            "tools": lists[name].tools if name in lists else None,
            "tools_seen_at": iso(lists[name].seen_at) if name in lists else None,
            "calls": sum(counts.get(name, {}).values()),
            "calls_by_outcome": counts.get(name, {}),
            "other_requests": other.get(name, 0),
        }
        for name in names
    ]
