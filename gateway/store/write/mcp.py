"""Stores MCP records (already redacted) in batches, for the recorder: idempotent, as a spool
replayed after a crash may hand over records already stored."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from gateway import jsoncodec
from gateway.mcp.records import Execution, McpViolation, MethodCall, Record, ToolList
from gateway.store.engine import write_connection
from gateway.store.mcp_tables import MCP_EXECUTIONS, MCP_METHODS, MCP_TOOLS, MCP_VIOLATIONS
from gateway.store.write.writer import merge_mcp_activity

Activity = list[tuple[str, datetime, int]]  # (trace id, when, violations it gains)


class McpStore:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def write_batch(self, records: Sequence[Record]) -> None:
        """One transaction. An execution's newest record wins; a violation counts on its run
        once: when first stored with its run, or when its execution joined a run later; a
        withdrawn one is deleted."""
        with write_connection(self._engine) as conn, conn.begin():
            executions = list({r.id: r for r in records if isinstance(r, Execution)}.values())
            violations = list({r.id: r for r in records if isinstance(r, McpViolation)}.values())
            _withdraw(conn, [v.id for v in violations if v.withdrawn])
            violations = [v for v in violations if not v.withdrawn]
            stored = _stored_violations(conn, [v.id for v in violations])
            fresh = [v for v in violations if v.id not in stored]
            joined = [v for v in violations if v.trace_id and stored.get(v.id, "") is None]
            # Trace rows first, in trace id order (as the step writer locks them).
            merge_mcp_activity(conn, _activity(executions, [*fresh, *joined]))
            if executions:
                _executions(conn, executions)
            if fresh:
                conn.execute(sa.insert(MCP_VIOLATIONS), [_violation_row(v) for v in fresh])
            if joined:
                _join_violations(conn, joined)
            _methods(conn, [r for r in records if isinstance(r, MethodCall)])
            for record in records:
                if isinstance(record, ToolList):
                    _tool_list(conn, record)


def _withdraw(conn: Connection, ids: list[str]) -> None:
    """Judgments taken back: only ever of an execution that joined no run then, so nothing
    was counted on a run."""
    if ids:
        table = MCP_VIOLATIONS
        conn.execute(sa.delete(table).where(table.c.id.in_(ids), table.c.trace_id.is_(None)))


def _stored_violations(conn: Connection, ids: list[str]) -> dict[str, str | None]:
    """The trace id each of these violations is stored with, by id."""
    if not ids:
        return {}
    query = sa.select(MCP_VIOLATIONS.c.id, MCP_VIOLATIONS.c.trace_id).where(
        MCP_VIOLATIONS.c.id.in_(ids)
    )
    return {row.id: row.trace_id for row in conn.execute(query)}


def _activity(executions: list[Execution], counted: list[McpViolation]) -> Activity:
    """The runs these records belong to: an execution makes its run visible, a violation
    counts on its run's `violation_count`."""
    activity: Activity = [(e.trace_id, e.started_at, 0) for e in executions if e.trace_id]
    activity += [(v.trace_id, v.created_at, 1) for v in counted if v.trace_id]
    return activity


def _executions(conn: Connection, executions: list[Execution]) -> None:
    ids = [e.id for e in executions]
    query = sa.select(MCP_EXECUTIONS.c.id).where(MCP_EXECUTIONS.c.id.in_(ids))
    stored = set(conn.scalars(query))
    fresh = [{"id": e.id, **_execution_row(e)} for e in executions if e.id not in stored]
    if fresh:
        conn.execute(sa.insert(MCP_EXECUTIONS), fresh)
    known = [{"_id": e.id, **_execution_row(e)} for e in executions if e.id in stored]
    if known:
        where = MCP_EXECUTIONS.c.id == sa.bindparam("_id")
        conn.execute(sa.update(MCP_EXECUTIONS).where(where), known)


def _join_violations(conn: Connection, joined: list[McpViolation]) -> None:
    rows = [{"_id": v.id, "trace_id": v.trace_id, "call_id": v.call_id} for v in joined]
    where = MCP_VIOLATIONS.c.id == sa.bindparam("_id")
    conn.execute(sa.update(MCP_VIOLATIONS).where(where), rows)


def _methods(conn: Connection, methods: list[MethodCall]) -> None:
    """Inserted once: a method call already stored (a replayed spool) is skipped."""
    if not methods:
        return
    query = sa.select(MCP_METHODS.c.server, MCP_METHODS.c.method, MCP_METHODS.c.started_at).where(
        MCP_METHODS.c.server.in_({m.server for m in methods}),
        MCP_METHODS.c.started_at.in_({m.started_at for m in methods}),
    )
    stored = {(row.server, row.method, row.started_at) for row in conn.execute(query)}
    rows = [_method_row(m) for m in methods]
    fresh = [r for r in rows if (r["server"], r["method"], r["started_at"]) not in stored]
    if fresh:
        conn.execute(sa.insert(MCP_METHODS), fresh)


def _violation_row(record: McpViolation) -> dict[str, Any]:
    return {
        "id": record.id,
        "kind": record.kind,
        "trace_id": record.trace_id,
        "execution_id": record.execution_id,
        "call_id": record.call_id,
        "server": record.server,
        "tool": record.tool,
        "detail": record.detail,
        "enforced": record.enforced,
        "created_at": record.created_at,
    }


def _execution_row(e: Execution) -> dict[str, Any]:
    return {
        "trace_id": e.trace_id,
        "call_id": e.call_id,
        "join": e.join,
        "server": e.server,
        "tool": e.tool[:256],
        "arguments": e.arguments,
        "result": e.result,
        "is_error": e.is_error,
        "error": e.error,
        "outcome": e.outcome,
        "duration_ms": e.duration_ms,
        "protocol_version": e.protocol_version,
        "session_id": e.session_id,
        "rpc_id": None if e.rpc_id is None else jsoncodec.dumps_text(e.rpc_id),
        "delivery": e.delivery,
        "started_at": e.started_at,
    }


def _tool_list(conn: Connection, record: ToolList) -> None:
    values = {"tools": record.tools, "seen_at": record.seen_at}
    done = conn.execute(
        sa.update(MCP_TOOLS).where(MCP_TOOLS.c.server == record.server).values(**values)
    )
    if done.rowcount == 0:
        conn.execute(sa.insert(MCP_TOOLS).values(server=record.server, **values))


def _method_row(record: MethodCall) -> dict[str, Any]:
    return {
        "server": record.server,
        "method": record.method[:128],
        "trace_id": record.trace_id,
        "outcome": record.outcome,
        "duration_ms": record.duration_ms,
        "protocol_version": record.protocol_version,
        "started_at": record.started_at,
    }
