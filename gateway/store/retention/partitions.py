"""Retention on a partitioned PostgreSQL store: a time partition whose every trace is past
the cutoff goes whole, instead of its steps, items and violations row by row.

A partition qualifies once its range ends before the cutoff (no trace can be placed in it
any more) and none of its traces was active since the cutoff. Its trace rows go first, a
thousand a transaction (budget ledger, MCP rows, models and the sessions' sums with them, as
row retention does); then one short transaction locks the three tables, checks that no
trace is left in the range (a replica may have stored one since) and drops the partition of
each: milliseconds whatever its size, no vacuum after. A partition with a trace still
active straddles the cutoff: its idle traces go by the row deletes, as on SQLite.
"""

from __future__ import annotations

import logging
from datetime import datetime
from functools import partial

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Connection, Engine

from gateway.store.models import TRACES
from gateway.store.partitions import ranges as partitions
from gateway.store.partitions.ranges import Partition
from gateway.store.retention.traces import bounded, forget_traces, sweep_tool_sets

log = logging.getLogger(__name__)

# Trace rows one transaction deletes before a drop: each is a few rows and index entries
# (its steps go with the partition), so a thousand take about as long as 100 steps' rows.
TRACES_PER_TRANSACTION = 1000
# Tries at the tables' lock before a drop waits for a later pass, each a short wait
# (partitions.DROP_LOCK_TIMEOUT) followed by as long a pause, so writers go on between them.
DROP_TRIES = 10
_BUSY = -1


def drop_expired(engine: Engine, cutoff: datetime) -> int:
    """Drop every partition whose traces are all idle since before `cutoff`; return how
    many traces went with them."""
    cutoff = partitions.naive_utc(cutoff)
    if not partitions.partitioned(engine):
        return 0
    with engine.connect() as conn:
        candidates = [p for p in partitions.listed(conn) if p.upper <= cutoff]
    purged = 0
    for part in candidates:
        with engine.connect() as conn:
            if _active(conn, part, cutoff):
                continue
            tool_sets = _tool_sets(conn, part)
        while done := bounded(engine, partial(_forget_some, part=part, cutoff=cutoff)):
            purged += done
        if _drop_when_free(engine, part):
            sweep_tool_sets(engine, tool_sets)
    return purged


def _in(part: Partition) -> sa.ColumnElement[bool]:
    placed = TRACES.c.placed_at
    return sa.and_(placed >= part.lower, placed < part.upper)


def _active(conn: Connection, part: Partition, cutoff: datetime) -> bool:
    query = sa.select(TRACES.c.id).where(_in(part), TRACES.c.updated_at >= cutoff).limit(1)
    return conn.execute(query).first() is not None


def _tool_sets(conn: Connection, part: Partition) -> list[str]:
    """The tool sets the partition's steps use: read before it goes, dropped after if no
    other step uses them."""
    query = f"SELECT DISTINCT tool_set FROM {part.table('steps')} WHERE tool_set IS NOT NULL"
    return list(conn.exec_driver_sql(query).scalars())


def _forget_some(conn: Connection, part: Partition, cutoff: datetime) -> int:
    """Up to TRACES_PER_TRANSACTION idle trace rows of the partition, skipping any a writer
    holds (then the drop waits for a later pass)."""
    t = TRACES.c
    query = (
        sa.select(t.id)
        .where(_in(part), t.updated_at < cutoff)
        .limit(TRACES_PER_TRANSACTION)
        .with_for_update(skip_locked=True)
    )
    ids = list(conn.execute(query).scalars())
    if ids:
        forget_traces(conn, ids)
    return len(ids)


def _drop_when_free(engine: Engine, part: Partition) -> bool:
    for _ in range(DROP_TRIES):
        dropped = bounded(engine, partial(_drop, part=part))
        if dropped != _BUSY:
            return dropped == 1
    log.info("partition from %s not dropped now: its tables stay busy", part.lower)
    return False


def _drop(conn: Connection, part: Partition) -> int:
    """1 once the partition is dropped; 0 if a trace is placed in it again; _BUSY if the
    tables stay in use for longer than the lock timeout."""
    try:
        with conn.begin_nested():
            partitions.lock_tables(conn)
    except sa_exc.OperationalError:
        return _BUSY
    if conn.execute(sa.select(TRACES.c.id).where(_in(part)).limit(1)).first() is not None:
        return 0
    partitions.drop(conn, part)
    return 1
