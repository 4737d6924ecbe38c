"""Retention of MCP rows on SQLite and PostgreSQL: they go with their trace; rows of no
stored trace go once older than the cutoff; recent ones and the tool lists stay."""

from __future__ import annotations

from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from gateway.mcp.records import Execution, McpViolation, MethodCall, ToolList
from gateway.store.mcp_tables import MCP_EXECUTIONS, MCP_METHODS, MCP_TOOLS, MCP_VIOLATIONS
from gateway.store.mcp_writer import McpStore
from gateway.store.retention import purge_batch
from gateway.store.writer import StoreWriter
from tests.factories import build_step
from tests.store.test_retention import NOW, OLD, RECENT


def _mcp_rows(trace: str | None, at: datetime, tag: str) -> list[object]:
    return [
        Execution(
            id=f"ex-{tag}", server="fs", tool="read", arguments={}, started_at=at, trace_id=trace
        ),
        MethodCall("fs", "ping", at, 1.0, "ok", trace),
        McpViolation(f"mv-{tag}", "undeclared_tool", "x", at, "fs", trace_id=trace),
    ]


def test_mcp_rows_go_with_their_trace_or_by_age(engine: Engine) -> None:
    StoreWriter(engine).write_batch([build_step("old", at=OLD), build_step("recent", at=RECENT)])
    McpStore(engine).write_batch(
        [
            *_mcp_rows("old", OLD, "old"),
            *_mcp_rows("recent", RECENT, "recent"),
            *_mcp_rows(None, OLD, "loose-old"),
            *_mcp_rows("mcp-only", OLD, "named-old"),
            *_mcp_rows(None, RECENT, "loose-recent"),
            ToolList("fs", [{"name": "read"}], OLD),
        ]
    )
    cutoff = NOW - timedelta(days=30)
    # "old" and "named-old": a run with only MCP activity is a stored trace of its own.
    assert purge_batch(engine, cutoff, 500) == 2
    assert purge_batch(engine, cutoff, 500) == 0  # then the rows of no stored trace
    with engine.connect() as conn:
        ids = set(conn.execute(sa.select(MCP_EXECUTIONS.c.id)).scalars())
        kept = [
            conn.execute(sa.select(sa.func.count()).select_from(t)).scalar()
            for t in (MCP_METHODS, MCP_VIOLATIONS, MCP_TOOLS)
        ]
    assert ids == {"ex-recent", "ex-loose-recent"}
    assert kept == [2, 2, 1]
