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

# Deleted with their trace by trace_purge (in the transaction that deletes it).
TABLES = tuple(table for table, _ in _TIMED)


def purge_traceless(conn: Connection, cutoff: datetime, limit: int) -> int:
    """Up to `limit` MCP rows of each table older than `cutoff` that belong to no stored
    trace (retention calls it a transaction at a time until none is left)."""
    deleted = 0
    for table, column in _TIMED:
        # A probe of the traces' primary key a row: NOT IN (SELECT id FROM traces) read
        # every trace row into a hash, or past work_mem compared each row with all of them.
        stored = sa.exists().where(TRACES.c.id == table.c.trace_id)
        some = sa.select(table.c.id).where(table.c[column] < cutoff, ~stored).limit(limit)
        deleted += conn.execute(table.delete().where(table.c.id.in_(some))).rowcount or 0
    return deleted
