"""What retention does whichever way a trace's steps go (row by row, or with their time
partition): the trace's rows outside the per-step tables, its session's sums, the tool sets
no step uses any more, each in short transactions with a pause after each.

On PostgreSQL a retention transaction's time goes less to its statements (index probes of
a few hundred rows, each well under 10 ms) than to the round trips between them (each one
the thread waits for a CPU, and for the interpreter lock its process shares) and to the
COMMIT's wait for the WAL to reach disk; so the statements are few, and the COMMIT does not
wait (below)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from functools import partial

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from gateway.store.engine import write_connection
from gateway.store.ledger.core import BudgetLedgerRow
from gateway.store.models import STEPS, TOOL_SETS, TRACE_MODELS, TRACES
from gateway.store.retention import mcp as mcp_purge
from gateway.store.write import session_summary

LEDGER: sa.Table = BudgetLedgerRow.__table__  # type: ignore[attr-defined]
# The rows a trace owns outside steps, items and violations, each found by its trace id.
OWNED: tuple[sa.Table, ...] = (LEDGER, *mcp_purge.TABLES, TRACE_MODELS)
TOOL_SETS_PER_TRANSACTION = 1000


def bounded(engine: Engine, work: Callable[[Connection], int]) -> int:
    """One short write transaction, then as long a pause, so a waiting writer gets in."""
    started = time.monotonic()
    with write_connection(engine) as conn, conn.begin():
        if conn.dialect.name == "postgresql":
            # Its COMMIT returns before its WAL is on disk (the next flush, a writer's
            # commit or the WAL writer's within a few hundred ms, takes it): a crash may
            # lose the last deletes, whole and in order, and the next pass makes them
            # again; the locks go without waiting for the disk (up to 100 ms under load).
            conn.exec_driver_sql("SET LOCAL synchronous_commit TO OFF")
        done = work(conn)
    time.sleep(min(0.5, max(0.005, time.monotonic() - started)))
    return done


def forget_traces(conn: Connection, ids: Sequence[str]) -> None:
    """Delete the trace rows and what they own besides steps, items and violations: budget
    ledger, MCP rows, models; their sessions' sums go down (in the caller's transaction)."""
    _delete_owned(conn, ids)
    gone = session_summary.gone(conn, ids)
    conn.execute(TRACES.delete().where(TRACES.c.id.in_(ids)))
    session_summary.take_out(conn, gone)


def _delete_owned(conn: Connection, ids: Sequence[str]) -> None:
    """The OWNED rows of these traces: on PostgreSQL one statement (its deletes as
    data-modifying WITH queries), one round trip instead of one a table."""
    deletes = [table.delete().where(table.c.trace_id.in_(ids)) for table in OWNED]
    if conn.dialect.name != "postgresql":
        for delete in deletes:
            conn.execute(delete)
        return
    *first, last = deletes
    with_queries = [delete.cte(f"purged_{n}") for n, delete in enumerate(first)]
    conn.execute(last.add_cte(*with_queries))


def drop_unused_tool_sets(conn: Connection, hashes: Iterable[str]) -> None:
    """Tool sets are shared by content: one goes when no step left refers to it."""
    hashes = sorted(hashes)
    if not hashes:
        return
    # One index probe a hash: a tool set every run declares has millions of steps.
    used = sa.exists().where(STEPS.c.tool_set == TOOL_SETS.c.hash)
    # A list a writer has claimed for a batch not yet committed (its row locked, see
    # gateway.store.write.tool_sets) is skipped, not deleted under the steps about to name it.
    unused = (
        sa.select(TOOL_SETS.c.hash)
        .where(TOOL_SETS.c.hash.in_(hashes), ~used)
        .with_for_update(skip_locked=True)
    )
    conn.execute(TOOL_SETS.delete().where(TOOL_SETS.c.hash.in_(unused.scalar_subquery())))


def sweep_tool_sets(engine: Engine, hashes: Iterable[str]) -> None:
    """drop_unused_tool_sets after a pass, in transactions of their own: a pass's steps
    mostly share a few tool sets, so each is probed once, not once a transaction."""
    ordered = sorted(set(hashes))
    for start in range(0, len(ordered), TOOL_SETS_PER_TRANSACTION):
        chunk = ordered[start : start + TOOL_SETS_PER_TRANSACTION]
        bounded(engine, partial(_drop_unused, hashes=chunk))


def _drop_unused(conn: Connection, hashes: list[str]) -> int:
    drop_unused_tool_sets(conn, hashes)
    return 0
