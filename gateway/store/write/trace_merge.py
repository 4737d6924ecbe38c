"""The trace rows of a batch at the driver, one new row version a trace: a multi-row insert of
the traces not stored yet, complete (folded as a first batch), that locks the stored ones
without changing them; then a read of those under their locks and one executemany adding
the batch to them with their folded summary.

Every update of a trace row writes a new version and an entry in each of its indexes (the
columns that change are indexed: no HOT update), so a batch changes each row once.
Plain SQL both dialects share (`ON CONFLICT … DO UPDATE … WHERE`, `excluded`, `RETURNING`),
with values converted here as the column types would: no statement compiled per batch.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple

from sqlalchemy.engine import Connection, Dialect

from gateway import jsoncodec
from gateway.step import FORK_AT, FORK_OF, Lineage, RefusalRecord, Replay, StepRecord
from gateway.store.models import TRACES
from gateway.store.write import session_summary
from gateway.store.write.rows import converter, placeholder

# The run summary as stored before the batch: the merge leaves these columns alone, so its
# RETURNING reads them under the row lock it took.
SUMMARY_COLUMNS = (
    "last_step_started_at",
    "last_stop_reason",
    "open_calls",
    "last_refusal_at",
    "last_refusal_kind",
    "last_response_end",
    "first_user_text",
)
TOKEN_SUMS = (
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "cached_tokens",
    "reasoning_tokens",
)
_ADDED = (*TOKEN_SUMS, "step_count", "violation_count", "cost_nano", "unpriced_steps", "model_ms")
_INSERTED = (
    "id",
    "started_at",
    "updated_at",
    "status",
    "step_count",
    "models",
    *TOKEN_SUMS,
    "violation_count",
    "budget_max_steps",
    "budget_max_tokens",
    "cost_nano",
    "unpriced_steps",
    "model_ms",
    "session_id",
    "placed_at",
    *SUMMARY_COLUMNS,
    # Its place in a tree of runs: set when the row is made, never merged.
    "parent_trace_id",
    "parent_call_id",
    "root_trace_id",
    "depth",
    "client",
    # A replay's recorded trace, set when the row is made; where it diverged, the earliest.
    "replay_of",
    "diverged_at",
    "fork_of",
    "fork_at",
)
# What the fold reads of a stored row, and session_summary of a trace joining its session.
# `placed_at` is set when the row is made and never merged: every batch of a trace places
# its rows where the first did (gateway.store.partitions.ranges).
_READ = ("id", "step_count", "models", *SUMMARY_COLUMNS, *session_summary.RETURNED, "placed_at")
FOLDED_COLUMNS = (*SUMMARY_COLUMNS, "status", "status_final", "models", "span_ms", "session_id")
# A new trace's row: the batch's counts and its fold, whole.
_NEW = (*_INSERTED, "status_final", "span_ms", "tool_ms")
_ADD_TO_STORED = ", ".join(
    [f"{name} = {name} + {{mark}}" for name in _ADDED]
    + ["started_at = {mark}", "updated_at = {mark}"]
    + [f"{name} = coalesce({{mark}}, {name})" for name in ("budget_max_steps", "budget_max_tokens")]
    + [f"{name} = {{mark}}" for name in FOLDED_COLUMNS]
    + ["tool_ms = tool_ms + {mark}"]
)
_TIMES = frozenset(
    {
        "last_step_started_at",
        "last_refusal_at",
        "last_response_end",
        "started_at",
        "updated_at",
        "placed_at",
    }
)


class StoredTrace(NamedTuple):
    """A trace row as the fold sees it: counts and times with the batch added, run summary
    and session as stored before it."""

    id: str
    step_count: int
    models: list[str]
    last_step_started_at: datetime | None
    last_stop_reason: str | None
    open_calls: int
    last_refusal_at: datetime | None
    last_refusal_kind: str | None
    last_response_end: datetime | None
    first_user_text: str | None
    session_id: str | None  # as stored before the batch
    started_at: datetime
    updated_at: datetime
    total_tokens: int
    violation_count: int
    cost_nano: int
    placed_at: datetime | None  # null for a trace stored before revision 0011, unconverted


def as_new(row: dict[str, Any]) -> StoredTrace:
    """The stored row of a trace this batch creates (`row` as the batch alone makes it)."""
    named = {name: row[name] for name in _READ}
    named["open_calls"] = int(named["open_calls"] or 0)
    return StoredTrace(**named)


def with_batch(before: StoredTrace, row: dict[str, Any]) -> StoredTrace:
    """A stored trace with the batch's counts and times added (read under its row lock)."""
    return before._replace(
        step_count=before.step_count + row["step_count"],
        started_at=min(before.started_at, row["started_at"]),
        updated_at=max(before.updated_at, row["updated_at"]),
        total_tokens=before.total_tokens + row["total_tokens"],
        violation_count=before.violation_count + row["violation_count"],
        cost_nano=before.cost_nano + row["cost_nano"],
    )


def lineage_columns(trace_id: str, lineage: Lineage | None) -> dict[str, Any]:
    """A new trace's place in its tree: a root unless its first step knew a parent."""
    lineage = lineage or Lineage(trace_id)
    return {
        "parent_trace_id": lineage.parent_trace_id,
        "parent_call_id": lineage.parent_call_id,
        "root_trace_id": lineage.root_trace_id,
        "depth": lineage.depth,
    }


def replay_columns(replay: Replay | None) -> dict[str, Any]:
    if replay is None:
        return {"replay_of": None, "diverged_at": None}
    return {"replay_of": replay.of, "diverged_at": replay.diverged_at}


def earliest_divergence(kept: Replay | None, step: Replay | None) -> Replay | None:
    """A trace's replay as its steps so far say: the first one's recorded trace, the
    earliest step any of them names as where the agent left the recording."""
    if kept is None or step is None:
        return kept or step
    steps = [n for n in (kept.diverged_at, step.diverged_at) if n is not None]
    return Replay(kept.of, min(steps, default=None))


def mark_diverged(conn: Connection, replays: Sequence[tuple[str, Replay]]) -> None:
    """Stored replays' divergence as a later batch learns it: only ever earlier, so a late
    or retried write never moves it; the rows are locked already (insert_new)."""
    found = [(trace_id, r.diverged_at) for trace_id, r in replays if r.diverged_at is not None]
    if not found:
        return
    mark = placeholder(conn)
    sql = (
        f"UPDATE traces SET diverged_at = {mark} WHERE id = {mark}"
        f" AND (diverged_at IS NULL OR diverged_at > {mark})"
    )
    conn.exec_driver_sql(sql, [(n, trace_id, n) for trace_id, n in found])


def fork_columns(
    steps: Sequence[StepRecord], refusals: Sequence[RefusalRecord] = ()
) -> dict[str, Any]:
    """A new trace's `fork_of` and `fork_at`: from its first step made by the fork API, else
    from a fork API request refused before the provider."""
    for step in steps:
        if step.attrs and FORK_OF in step.attrs:
            return {"fork_of": step.attrs[FORK_OF], "fork_at": step.attrs[FORK_AT]}
    for refusal in refusals:
        if refusal.fork is not None:
            return {"fork_of": refusal.fork[0], "fork_at": refusal.fork[1]}
    return {"fork_of": None, "fork_at": None}


def touch_ancestors(conn: Connection, runs: Sequence[tuple[Lineage, datetime]]) -> None:
    """A sub-agent's activity is its parent's and its root's (`runs`: the batch's places in
    trees and their last activity): a run waiting on a running child is not idle, nor
    abandoned. Only ever later, so replicas and late writes agree; ids in order, as every
    lock here."""
    latest: dict[str, datetime] = {}
    for lineage, at in runs:
        if lineage.parent_trace_id is None:
            continue
        for trace_id in {lineage.parent_trace_id, lineage.root_trace_id}:
            latest[trace_id] = max(latest.get(trace_id, at), at)
    if not latest:
        return
    mark = placeholder(conn)
    sql = f"UPDATE traces SET updated_at = {mark} WHERE id = {mark} AND updated_at < {mark}"
    convert = converter(conn, TRACES.c["updated_at"].type)
    conn.exec_driver_sql(sql, [(convert(at), i, convert(at)) for i, at in sorted(latest.items())])


def insert_new(conn: Connection, rows: Sequence[dict[str, Any]]) -> set[str]:
    """Insert the rows (`_NEW` columns, sorted by id) of traces not stored yet; the stored
    ones are locked, not changed. Returns the ids inserted.

    The locks are taken in id order, as every writer does: replicas cannot deadlock. A
    trace another replica inserts meanwhile is waited for, then counts as stored."""
    convert = [converter(conn, TRACES.c[name].type) for name in _NEW]
    # DO UPDATE … WHERE false: a stored row is locked, left as it is and not returned.
    conflict = "ON CONFLICT (id) DO UPDATE SET id = excluded.id WHERE 1 = 0 RETURNING id"
    if conn.dialect.name == "postgresql":
        columns = [[f(row[name]) for row in rows] for f, name in zip(convert, _NEW, strict=True)]
        sql = f"INSERT INTO traces ({', '.join(_NEW)}) {_pg_batch_rows(conn.dialect)} {conflict}"
        return set(conn.exec_driver_sql(sql, tuple(columns)).scalars())
    mark = placeholder(conn)
    one = "(" + ", ".join([mark] * len(_NEW)) + ")"
    sql = f"INSERT INTO traces ({', '.join(_NEW)}) VALUES {', '.join([one] * len(rows))} {conflict}"
    values = [f(row[name]) for row in rows for f, name in zip(convert, _NEW, strict=True)]
    return set(conn.exec_driver_sql(sql, tuple(values)).scalars())


@functools.cache
def _pg_batch_rows(dialect: Dialect) -> str:
    """A batch's rows as one array a column, unnested in id order: the statement's text is
    the same whatever the batch's size, so psycopg converts it once (its placeholders, one
    a value, cost more to find in a many-row VALUES than the statement takes to run)."""
    arrays = ", ".join(f"%s::{TRACES.c[name].type.compile(dialect=dialect)}[]" for name in _NEW)
    return f"SELECT * FROM unnest({arrays}) AS batch({', '.join(_NEW)}) ORDER BY id"


def read_stored(conn: Connection, trace_ids: Sequence[str]) -> dict[str, StoredTrace]:
    """The stored rows of these traces, as stored (their locks already held)."""
    if not trace_ids:
        return {}
    select = f"SELECT {', '.join(_READ)} FROM traces WHERE "
    if conn.dialect.name == "postgresql":
        found = conn.exec_driver_sql(select + "id = ANY(%s)", (list(trace_ids),))
    else:
        found = conn.exec_driver_sql(
            select + f"id IN ({', '.join('?' * len(trace_ids))})", tuple(trace_ids)
        )
    return {row[0]: _stored(row) for row in found}


def add_to_stored(conn: Connection, rows: Sequence[dict[str, Any]]) -> None:
    """Add a batch to stored traces: counts by increment, times and folded summary as
    computed under the row lock, tool time by increment. Each row holds `_ADDED`,
    `started_at`, `updated_at` (merged), the budgets, FOLDED_COLUMNS, `add_tool_ms`, `id`."""
    if not rows:
        return
    mark = placeholder(conn)
    sql = f"UPDATE traces SET {_ADD_TO_STORED.format(mark=mark)} WHERE id = {mark}"
    names = (
        *_ADDED,
        "started_at",
        "updated_at",
        "budget_max_steps",
        "budget_max_tokens",
        *FOLDED_COLUMNS,
    )
    convert = [converter(conn, TRACES.c[name].type) for name in names]
    values = [
        (
            *(f(row[name]) for f, name in zip(convert, names, strict=True)),
            row["add_tool_ms"],
            row["id"],
        )
        for row in rows
    ]
    conn.exec_driver_sql(sql, values)


def _stored(row: Sequence[Any]) -> StoredTrace:
    named = dict(zip(_READ, row, strict=True))
    for name in _TIMES:
        named[name] = _time(named[name])
    models = named["models"]
    named["models"] = jsoncodec.loads(models) if isinstance(models, str | bytes) else models
    named["open_calls"] = int(named["open_calls"] or 0)
    return StoredTrace(**named)


def _time(value: Any) -> datetime | None:
    """Stored naive UTC (text on SQLite, as the driver hands it over) to aware UTC."""
    if value is None:
        return None
    when: datetime = datetime.fromisoformat(value) if isinstance(value, str) else value
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)
