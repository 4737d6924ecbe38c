"""Retention: a background purge of traces idle longer than `retention_days`, with every row
that belongs to them (steps, items, violations, budget ledger, MCP executions, models) and
the tool sets no step left refers to; their sessions' summaries are adjusted.

Bounded: a pass deletes at most `batch_size` traces in one short transaction in a worker
thread, passes are separated by a pause, and once nothing is left the next sweep waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from gateway.store import fulltext, mcp_purge, session_summary, trace_models
from gateway.store.engine import write_connection
from gateway.store.ledger import BudgetLedgerRow
from gateway.store.models import ITEMS, STEPS, TOOL_SETS, TRACES, VIOLATIONS

log = logging.getLogger(__name__)

LEDGER: sa.Table = BudgetLedgerRow.__table__  # type: ignore[attr-defined]
BATCH_SIZE = 500  # traces a pass; one transaction short enough not to hold up the recorder
PAUSE_SECONDS = 1.0  # between passes while old traces remain
SWEEP_SECONDS = 3600.0  # between sweeps once none remain


def purge_batch(engine: Engine, cutoff: datetime, limit: int) -> int:
    """Delete up to `limit` traces last updated before `cutoff`, and all their rows."""
    with write_connection(engine) as conn, conn.begin():
        oldest = (
            sa.select(TRACES.c.id)
            .where(TRACES.c.updated_at < cutoff)
            .order_by(TRACES.c.updated_at)
            .limit(limit)
        )
        if conn.dialect.name == "postgresql":
            # A trace a replica's recorder is updating right now is left for the next pass.
            oldest = oldest.with_for_update(skip_locked=True)
        ids = list(conn.execute(oldest).scalars())
        if not ids:
            mcp_purge.purge_traceless(conn, cutoff)
            return 0
        steps = sa.select(STEPS.c.id).where(STEPS.c.trace_id.in_(ids))
        tool_sets = _tool_sets_of(conn, ids)
        # Children first: correct without relying on ON DELETE CASCADE being enforced.
        fulltext.forget_steps(conn, steps)
        conn.execute(ITEMS.delete().where(ITEMS.c.step_id.in_(steps)))
        conn.execute(VIOLATIONS.delete().where(VIOLATIONS.c.trace_id.in_(ids)))
        conn.execute(STEPS.delete().where(STEPS.c.trace_id.in_(ids)))
        _drop_unused_tool_sets(conn, tool_sets)
        conn.execute(LEDGER.delete().where(LEDGER.c.trace_id.in_(ids)))
        mcp_purge.purge_traces(conn, ids)
        trace_models.forget(conn, ids)
        session_summary.forget(conn, ids)
        conn.execute(TRACES.delete().where(TRACES.c.id.in_(ids)))
    return len(ids)


def _tool_sets_of(conn: Connection, trace_ids: list[str]) -> list[str]:
    query = sa.select(STEPS.c.tool_set).where(
        STEPS.c.trace_id.in_(trace_ids), STEPS.c.tool_set.is_not(None)
    )
    return list(conn.execute(query.distinct()).scalars())


def _drop_unused_tool_sets(conn: Connection, hashes: list[str]) -> None:
    """Tool sets are shared by content: one goes when no step left refers to it."""
    if not hashes:
        return
    used = sa.select(STEPS.c.tool_set).where(STEPS.c.tool_set.in_(hashes))
    conn.execute(
        TOOL_SETS.delete().where(TOOL_SETS.c.hash.in_(hashes), TOOL_SETS.c.hash.not_in(used))
    )


class Retention:
    """The purge loop: start() with the app, close() before the engine is disposed."""

    def __init__(
        self,
        engine: Engine,
        days: int,
        *,
        clock: Callable[[], datetime],
        batch_size: int = BATCH_SIZE,
        pause: float = PAUSE_SECONDS,
        sweep_every: float = SWEEP_SECONDS,
        on_purged: Callable[[int], None] | None = None,
    ) -> None:
        self._engine = engine
        self._age = timedelta(days=days)
        self._clock = clock
        self._batch_size = batch_size
        self._pause = pause
        self._sweep_every = sweep_every
        self._on_purged = on_purged
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.purged_total = 0
        self.passes = 0

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="retention")

    async def close(self) -> None:
        """Stop after the pass under way (a pass is one bounded transaction)."""
        self._stop.set()
        if self._task is not None:
            await self._task

    async def _run(self) -> None:
        swept = 0
        while not self._stop.is_set():
            deleted = await self._pass()
            swept += deleted
            more = deleted == self._batch_size
            if not more and swept:
                log.info("retention: purged %d traces idle for over %s", swept, self._age)
                swept = 0
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self._stop.wait(), self._pause if more else self._sweep_every
                )

    async def _pass(self) -> int:
        cutoff = self._clock() - self._age
        try:
            deleted = await asyncio.to_thread(purge_batch, self._engine, cutoff, self._batch_size)
        except Exception as exc:  # the database may be away; the next sweep tries again
            log.warning("retention pass failed: %s", exc)
            return 0
        self.passes += 1
        self.purged_total += deleted
        if deleted and self._on_purged is not None:
            self._on_purged(deleted)
        return deleted
