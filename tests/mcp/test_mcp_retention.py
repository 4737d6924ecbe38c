"""Retention of MCP rows on SQLite and PostgreSQL: they go with their trace; rows of no
stored trace go once older than the cutoff; recent ones and the tool lists stay."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from gateway.mcp.records import Execution, McpViolation, MethodCall, ToolList
from gateway.store.mcp_tables import MCP_EXECUTIONS, MCP_METHODS, MCP_TOOLS, MCP_VIOLATIONS
from gateway.store.retention import sweep as retention
from gateway.store.retention import traces as trace_purge
from gateway.store.retention.sweep import purge_batch
from gateway.store.write.mcp import McpStore
from gateway.store.write.writer import StoreWriter
from tests.factories import build_step
from tests.store.deletes_counted import deletes_per_transaction
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


def test_mcp_rows_of_no_trace_go_a_few_a_transaction(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """However many there are, each transaction deletes a bounded number of them."""
    monkeypatch.setattr(retention, "TRACELESS_ROWS", 2)
    monkeypatch.setattr(trace_purge.time, "sleep", lambda _: None)
    StoreWriter(engine).write_batch([build_step("recent", at=RECENT)])
    loose = [row for n in range(5) for row in _mcp_rows(None, OLD, f"loose-{n}")]
    McpStore(engine).write_batch([*loose, *_mcp_rows("recent", OLD, "kept")])
    with deletes_per_transaction(engine, "DELETE FROM mcp_") as deleted:  # rows a transaction
        assert purge_batch(engine, NOW - timedelta(days=30), 500) == 0

    assert max(deleted) <= 3 * 2 and sum(deleted) == 3 * 5
    with engine.connect() as conn:
        left = set(conn.execute(sa.select(MCP_EXECUTIONS.c.id)).scalars())
    assert left == {"ex-kept"}
