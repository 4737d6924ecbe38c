"""What retention does whichever way a trace's steps go (row by row, or with their time
partition): the trace's rows outside the per-step tables, its session's sums, the tool sets
no step uses any more, each in short transactions with a pause after each."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from gateway.store import mcp_purge, session_summary, trace_models
from gateway.store.engine import write_connection
from gateway.store.ledger import BudgetLedgerRow
from gateway.store.models import STEPS, TOOL_SETS, TRACES

LEDGER: sa.Table = BudgetLedgerRow.__table__  # type: ignore[attr-defined]


def bounded(engine: Engine, work: Callable[[Connection], int]) -> int:
    """One short write transaction, then as long a pause, so a waiting writer gets in."""
    started = time.monotonic()
    with write_connection(engine) as conn, conn.begin():
        done = work(conn)
    time.sleep(min(0.5, max(0.005, time.monotonic() - started)))
    return done


def forget_traces(conn: Connection, ids: Sequence[str]) -> None:
    """Delete the trace rows and what they own besides steps, items and violations: budget
    ledger, MCP rows, models; their sessions' sums go down (in the caller's transaction)."""
    conn.execute(LEDGER.delete().where(LEDGER.c.trace_id.in_(ids)))
    mcp_purge.purge_traces(conn, list(ids))
    trace_models.forget(conn, ids)
    session_summary.forget(conn, ids)
    conn.execute(TRACES.delete().where(TRACES.c.id.in_(ids)))


def drop_unused_tool_sets(conn: Connection, hashes: list[str]) -> None:
    """Tool sets are shared by content: one goes when no step left refers to it."""
    if not hashes:
        return
    # One index probe a hash: a tool set every run declares has millions of steps.
    used = sa.exists().where(STEPS.c.tool_set == TOOL_SETS.c.hash)
    conn.execute(TOOL_SETS.delete().where(TOOL_SETS.c.hash.in_(hashes), ~used))
