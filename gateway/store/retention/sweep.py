"""Retention: a background purge of traces idle longer than `retention_days`, with every row
that belongs to them (steps, items, violations, budget ledger, MCP executions, models) and
the tool sets no step left refers to; their sessions' summaries are adjusted. On a
partitioned PostgreSQL store (`loopwatch store partition`) whole time partitions go first
(gateway.store.retention.partitions).

Bounded: a pass deletes at most `batch_size` traces in a worker thread, in transactions of
a few hundred steps with a pause after each (a long run's steps go a slice at a time), so
the recorder never waits long for the write lock; passes are separated by a pause, and once
nothing is left the next sweep waits. The tool sets the pass's steps used are checked once,
at its end (gateway.store.retention.traces.sweep_tool_sets).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import partial
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from gateway.background import Background
from gateway.store import open_responses
from gateway.store.models import ITEMS, STEPS, TRACES, VIOLATIONS
from gateway.store.partitions import ranges as partitions
from gateway.store.retention import mcp as mcp_purge
from gateway.store.retention import partitions as partition_purge
from gateway.store.retention.traces import LEDGER, bounded, forget_traces, sweep_tool_sets
from gateway.store.write import fulltext

log = logging.getLogger(__name__)

__all__ = ["LEDGER", "Retention", "purge_batch"]
BATCH_SIZE = 500  # traces a pass
# Steps (with their items, search entries and violations) one transaction deletes: tens of
# milliseconds, so the recorder waiting for the write lock is never held up for long.
STEPS_PER_TRANSACTION = 100
TRACELESS_ROWS = 500  # MCP rows of no stored trace, of each table, a transaction deletes
PAUSE_SECONDS = 1.0  # between passes while old traces remain
SWEEP_SECONDS = 3600.0  # between sweeps once none remain


def purge_batch(engine: Engine, cutoff: datetime, limit: int) -> int:
    """Drop the time partitions past `cutoff` (PostgreSQL), then delete up to `limit` traces
    last updated before `cutoff`, and all their rows, in transactions of at most
    STEPS_PER_TRANSACTION steps; return how many traces went."""
    purged = partition_purge.drop_expired(engine, cutoff)
    candidates = _oldest(engine, cutoff, limit)
    if not candidates:
        traceless = partial(mcp_purge.purge_traceless, cutoff=cutoff, limit=TRACELESS_ROWS)
        while bounded(engine, traceless):
            pass
        bounded(engine, partial(open_responses.forget_older, cutoff=cutoff))  # a few rows
        return purged
    # Those of the deleted steps; one of a rolled-back delete is still used, so kept.
    tool_sets: set[str] = set()
    try:
        for group in _groups(candidates):
            if len(group) == 1 and group[0][1] > STEPS_PER_TRANSACTION:
                _drain_steps(engine, group[0][0], cutoff, tool_sets)  # a slice at a time
            purge = partial(_purge_traces, candidates=group, cutoff=cutoff, tool_sets=tool_sets)
            purged += bounded(engine, purge)
    finally:
        sweep_tool_sets(engine, tool_sets)
    return purged


def _oldest(engine: Engine, cutoff: datetime, limit: int) -> list[tuple[str, int]]:
    """(id, step count) of the oldest idle traces: a read, no lock taken."""
    t = TRACES.c
    query = sa.select(t.id, t.step_count).where(t.updated_at < cutoff)
    with engine.connect() as conn:
        rows = conn.execute(query.order_by(t.updated_at).limit(limit)).all()
    return [(row.id, int(row.step_count)) for row in rows]


def _groups(candidates: list[tuple[str, int]]) -> list[list[tuple[str, int]]]:
    """Consecutive traces whose steps add up to one transaction's worth (at least one)."""
    groups: list[list[tuple[str, int]]] = [[]]
    steps = 0
    for candidate in candidates:
        if groups[-1] and steps + candidate[1] > STEPS_PER_TRANSACTION:
            groups.append([])
            steps = 0
        groups[-1].append(candidate)
        steps += candidate[1]
    return groups


def _still_idle(conn: Connection, ids: list[str], cutoff: datetime) -> list[str]:
    """Those of `ids` still idle, locked until commit: a trace that got a step since it
    was picked stays (on PostgreSQL one a replica is writing now is left for later)."""
    t = TRACES.c
    query = sa.select(t.id).where(t.id.in_(ids), t.updated_at < cutoff)
    if conn.dialect.name == "postgresql":
        query = query.with_for_update(skip_locked=True)
    return list(conn.execute(query).scalars())


def _purge_traces(
    conn: Connection, candidates: list[tuple[str, int]], cutoff: datetime, tool_sets: set[str]
) -> int:
    ids = _still_idle(conn, [trace_id for trace_id, _ in candidates], cutoff)
    if not ids:
        return 0
    # The step ids as values, read once (with their tool sets): items are found by them.
    within = _partitions_of(conn, ids)
    of_traces = sa.and_(STEPS.c.trace_id.in_(ids), *within(STEPS))
    steps = conn.execute(sa.select(STEPS.c.id, STEPS.c.tool_set).where(of_traces)).all()
    step_ids = [step.id for step in steps]
    # Children first: correct without relying on ON DELETE CASCADE being enforced.
    fulltext.forget_steps(conn, step_ids)
    conn.execute(ITEMS.delete().where(ITEMS.c.step_id.in_(step_ids), *within(ITEMS)))
    conn.execute(VIOLATIONS.delete().where(VIOLATIONS.c.trace_id.in_(ids), *within(VIOLATIONS)))
    conn.execute(STEPS.delete().where(of_traces))
    forget_traces(conn, ids)
    tool_sets.update(step.tool_set for step in steps if step.tool_set is not None)
    return len(ids)


def _drain_steps(engine: Engine, trace_id: str, cutoff: datetime, tool_sets: set[str]) -> None:
    """Delete a long idle trace's steps oldest first, a transaction's worth at a time; the
    trace row and the rest go with `_purge_traces`. Stops if the trace gets a new step."""
    drain = partial(_delete_first_steps, trace_id=trace_id, cutoff=cutoff, tool_sets=tool_sets)
    while bounded(engine, drain):
        pass


def _delete_first_steps(
    conn: Connection, trace_id: str, cutoff: datetime, tool_sets: set[str]
) -> int:
    if not _still_idle(conn, [trace_id], cutoff):
        return 0
    s, within = STEPS.c, _partitions_of(conn, [trace_id])
    first = sa.select(s.id, s.tool_set).where(s.trace_id == trace_id, *within(STEPS))
    steps = conn.execute(first.order_by(s.seq).limit(STEPS_PER_TRANSACTION)).all()
    if len(steps) < STEPS_PER_TRANSACTION:
        return 0  # what is left fits one transaction with the trace row
    ids = [step.id for step in steps]
    fulltext.forget_steps(conn, ids)
    conn.execute(ITEMS.delete().where(ITEMS.c.step_id.in_(ids), *within(ITEMS)))
    conn.execute(VIOLATIONS.delete().where(VIOLATIONS.c.step_id.in_(ids), *within(VIOLATIONS)))
    conn.execute(STEPS.delete().where(s.id.in_(ids), *within(STEPS)))
    tool_sets.update(step.tool_set for step in steps if step.tool_set is not None)
    return len(ids)


def _partitions_of(
    conn: Connection, trace_ids: list[str]
) -> Callable[[sa.Table], list[sa.ColumnElement[bool]]]:
    """On a partitioned store, the condition keeping a statement on these traces' time
    partitions: it plans and probes those alone, not each one. None when unpartitioned."""
    placed: list[Any] = [None]
    if partitions.partitioned(conn.engine):
        query = sa.select(TRACES.c.placed_at).where(TRACES.c.id.in_(trace_ids)).distinct()
        placed = list(conn.scalars(query))
    if None in placed:
        return lambda table: []
    return lambda table: [table.c.placed_at.in_(placed)]


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

    def start(self, owner: Background) -> None:
        self._task = owner.task("retention", self._run(), stop=self._stop.set)

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
            more = deleted >= self._batch_size  # dropped partitions may add more
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
