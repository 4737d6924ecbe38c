"""Retention of the MCP tables: rows go with their trace, and rows of no stored trace (joined
none, or named a trace never recorded) once they are older than the cutoff."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from gateway.store.mcp_tables import MCP_EXECUTIONS, MCP_METHODS, MCP_VIOLATIONS
from gateway.store.models import TRACES

_TIMED = (
    (MCP_EXECUTIONS, "started_at"),
    (MCP_METHODS, "started_at"),
    (MCP_VIOLATIONS, "created_at"),
)


def purge_traces(conn: Connection, trace_ids: sa.Select[tuple[str]] | list[str]) -> None:
    """The MCP rows of these traces (called in the transaction that deletes them)."""
    for table, _ in _TIMED:
        conn.execute(table.delete().where(table.c.trace_id.in_(trace_ids)))


def purge_traceless(conn: Connection, cutoff: datetime) -> int:
    """MCP rows older than `cutoff` that belong to no stored trace."""
    stored = sa.select(TRACES.c.id)
    deleted = 0
    for table, column in _TIMED:
        old = table.c[column] < cutoff
        orphan = table.c.trace_id.is_(None) | table.c.trace_id.not_in(stored)
        deleted += conn.execute(table.delete().where(old, orphan)).rowcount or 0
    return deleted
