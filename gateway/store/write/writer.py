"""Batched writes of step and refusal records: one transaction a batch, exact under replicas.

Trace counters change only by atomic increments under the trace row's lock, so several
gateways sharing PostgreSQL keep them exact; a retried batch never writes a record twice.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Connection, Engine

from gateway.items import Violation
from gateway.step import Lineage, RefusalRecord, Replay, StepRecord
from gateway.store.engine import tune_for_batches, write_connection
from gateway.store.key_epochs import epoch_for_batch
from gateway.store.models import ITEMS, STEPS, TRACES, VIOLATIONS
from gateway.store.write import fulltext, layout, session_summary, trace_merge, trace_models
from gateway.store.write.rows import insert_many, item_rows, placeholder, step_row
from gateway.store.write.run_fold import Folded, fold, is_unpriced
from gateway.store.write.tool_sets import store_tool_sets
from gateway.store.write.trace_merge import SUMMARY_COLUMNS, TOKEN_SUMS, StoredTrace

Record = StepRecord | RefusalRecord

# Summed as reported; total_tokens falls back to prompt + completion when not reported.
_SUMMED_AS_IS = ("prompt_tokens", "completion_tokens", "cached_tokens", "reasoning_tokens")


def is_transient(exc: BaseException) -> bool:
    """Whether retrying the same batch later may succeed (database down, locked, slow)."""
    if isinstance(exc, sa_exc.DBAPIError) and exc.connection_invalidated:
        return True
    transient = (sa_exc.OperationalError, sa_exc.InterfaceError, sa_exc.TimeoutError, OSError)
    return isinstance(exc, transient)


@dataclass(slots=True)
class TraceDelta:
    """What one batch adds to one trace."""

    trace_id: str
    started_at: datetime
    updated_at: datetime
    steps: list[StepRecord] = field(default_factory=list)
    refusals: list[RefusalRecord] = field(default_factory=list)
    tokens: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TOKEN_SUMS, 0))
    violations: int = 0
    models: list[str] = field(default_factory=list)
    budget: dict[str, int] = field(default_factory=dict)
    cost_nano: int = 0
    unpriced_steps: int = 0
    model_ms: float = 0.0
    session_id: str | None = None
    lineage: Lineage | None = None  # of the batch's first step that knew one
    client: str | None = None
    replay: Replay | None = None  # what its steps say of a replay, the earliest divergence

    def add_step(self, record: StepRecord) -> None:
        self.steps.append(record)
        self.replay = trace_merge.earliest_divergence(self.replay, record.replay)
        self.lineage = self.lineage or record.lineage
        self.client = self.client or record.client
        self._widen(record.started_at, record.ended_at)
        usage = record.usage
        for name in _SUMMED_AS_IS:
            self.tokens[name] += getattr(usage, name) or 0
        self.tokens["total_tokens"] += usage.total()
        if record.model and record.model not in self.models:
            self.models.append(record.model)
        self.violations += len(record.violations)
        self._set_budget(record.budget_max_steps, record.budget_max_tokens)
        self.cost_nano += record.cost_nano or 0
        self.unpriced_steps += is_unpriced(record)
        self.model_ms += record.latency_ms or 0.0
        self.session_id = self.session_id or record.session_id

    def add_refusal(self, record: RefusalRecord) -> None:
        self.refusals.append(record)
        self.lineage = self.lineage or record.lineage
        self._widen(record.created_at, record.created_at)
        self.violations += len(record.violations)
        self._set_budget(record.budget_max_steps, record.budget_max_tokens)
        self.session_id = self.session_id or record.session_id

    def _widen(self, start: datetime, end: datetime) -> None:
        self.started_at = min(self.started_at, start)
        self.updated_at = max(self.updated_at, end)

    def _set_budget(self, max_steps: int | None, max_tokens: int | None) -> None:
        if max_steps is not None:
            self.budget["budget_max_steps"] = max_steps
        if max_tokens is not None:
            self.budget["budget_max_tokens"] = max_tokens


def violation_id(owner: str, index: int, violation: Violation) -> str:
    """Deterministic, so a batch retried after an unseen commit inserts nothing twice."""
    material = "\x00".join(
        [owner, str(index), violation.kind.value, violation.call_id or "", violation.detail]
    )
    return "v_" + hashlib.sha256(material.encode()).hexdigest()[:32]


def _refusal_owner(record: RefusalRecord) -> str:
    return f"refusal\x00{record.trace_id}\x00{record.created_at.isoformat()}"


@dataclass(slots=True)
class WrittenBatch:
    """What one batch stores, as the rows go to the driver, in the batch's own transaction."""

    records: list[Record]
    traces: list[TraceDelta]  # one a trace, sorted by id
    steps: list[dict[str, Any]] = field(default_factory=list)
    items: list[dict[str, Any]] = field(default_factory=list)
    words: bool = False  # the item rows carry their words (PostgreSQL, revision 0014 on)


class StoreWriter:
    """Writes batches of records; sync, meant for one dedicated worker thread.

    A batch is one transaction of a fixed number of statements whatever its size: on
    PostgreSQL a read of the store's layout (gateway.store.write.layout), one select of what is
    stored already, one insert of its new traces (locking the stored ones), a read of the
    stored ones and one update adding the batch to them, then one driver-level
    executemany per table."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def write_batch(self, records: Sequence[Record]) -> None:
        if not records:
            return
        with write_connection(self._engine) as conn, conn.begin():
            tune_for_batches(conn)
            stored = layout.read(conn)
            fresh = _unwritten(conn, records, stored.partitioned)
            if not fresh:
                return
            written = WrittenBatch(fresh, _group(fresh), words=stored.words_written)
            seqs, folds, traces = _merge_traces(conn, written.traces)
            placed = _placement(traces) if stored.partitioned else None
            _insert_steps(conn, written, seqs, folds, placed)
            _insert_violations(conn, fresh, placed)


def _unwritten(conn: Connection, records: Sequence[Record], partitioned: bool) -> list[Record]:
    """Drop records already stored (a retry after a commit whose answer was lost)."""
    step_ids = [r.id for r in records if isinstance(r, StepRecord)]
    refusal_ids = [
        violation_id(_refusal_owner(r), 0, r.violations[0])
        for r in records
        if isinstance(r, RefusalRecord) and r.violations
    ]
    placed = _placed_of(conn, records) if partitioned and (step_ids or refusal_ids) else None
    if placed == []:
        return list(records)  # none of their traces is stored: neither are they
    stored = _stored_ids(conn, STEPS, step_ids, placed)
    stored |= _stored_ids(conn, VIOLATIONS, refusal_ids, placed)
    fresh: list[Record] = []
    for record in records:
        key = record.id if isinstance(record, StepRecord) else ""
        if isinstance(record, RefusalRecord) and record.violations:
            key = violation_id(_refusal_owner(record), 0, record.violations[0])
        if key in stored:
            continue
        if key:
            stored.add(key)  # the same record twice in one batch is written once
        fresh.append(record)
    return fresh


def _stored_ids(
    conn: Connection, table: sa.Table, ids: list[str], placed: list[datetime] | None
) -> set[str]:
    """Which of `ids` the table holds, asked at the driver (no statement compiled a batch). On
    PostgreSQL one array parameter: the statement's text stays the same whatever the batch's
    size, so psycopg converts it once; on a partitioned store only the partitions `placed`."""
    if not ids:
        return set()
    if conn.dialect.name == "postgresql":
        sql = f"SELECT id FROM {table.name} WHERE id = ANY(%s)"
        if placed is None:
            return {row[0] for row in conn.exec_driver_sql(sql, (ids,))}
        sql += " AND placed_at = ANY(%s)"
        return {row[0] for row in conn.exec_driver_sql(sql, (ids, placed))}
    marks = ", ".join([placeholder(conn)] * len(ids))
    sql = f"SELECT id FROM {table.name} WHERE id IN ({marks})"
    return {row[0] for row in conn.exec_driver_sql(sql, tuple(ids))}


def _placed_of(conn: Connection, records: Sequence[Record]) -> list[datetime] | None:
    """On a partitioned store, where the records' stored traces place their rows: the
    look-up of stored records then reads those time partitions alone, not each one's index
    (and plans for one or two partitions, not every one)."""
    trace_ids = sorted({record.trace_id for record in records})
    query = sa.select(TRACES.c.placed_at).where(TRACES.c.id.in_(trace_ids)).distinct()
    placed = list(conn.scalars(query))
    return None if None in placed else placed  # (null: a trace the conversion left out)


def _group(records: list[Record]) -> list[TraceDelta]:
    """One delta per trace, sorted by trace id: every writer locks rows in the same order,
    so concurrent replicas cannot deadlock."""
    deltas: dict[str, TraceDelta] = {}
    for record in records:
        when = record.started_at if isinstance(record, StepRecord) else record.created_at
        delta = deltas.get(record.trace_id)
        if delta is None:
            delta = deltas[record.trace_id] = TraceDelta(record.trace_id, when, when)
        if isinstance(record, StepRecord):
            delta.add_step(record)
        else:
            delta.add_refusal(record)
    return [deltas[trace_id] for trace_id in sorted(deltas)]


def _trace_row(delta: TraceDelta) -> dict[str, Any]:
    """The trace row as this batch alone would make it, its run summary empty (the fold
    sets it): added to a stored row, or completed by the fold into a new one."""
    return {
        "id": delta.trace_id,
        "started_at": delta.started_at,
        "updated_at": delta.updated_at,
        "step_count": len(delta.steps),
        "models": delta.models,
        **delta.tokens,
        "violation_count": delta.violations,
        "budget_max_steps": delta.budget.get("budget_max_steps"),
        "budget_max_tokens": delta.budget.get("budget_max_tokens"),
        "cost_nano": delta.cost_nano,
        "unpriced_steps": delta.unpriced_steps,
        "model_ms": delta.model_ms,
        "session_id": None,  # set by the fold: session_summary sees a trace join its session
        "placed_at": delta.started_at,  # a new trace's; a stored one keeps its own
        **dict.fromkeys(SUMMARY_COLUMNS),
        "open_calls": 0,
        **trace_merge.lineage_columns(delta.trace_id, delta.lineage),
        "client": delta.client,
        **trace_merge.replay_columns(delta.replay),
        **trace_merge.fork_columns(delta.steps, delta.refusals),
    }


Placement = dict[str, datetime] | None


def _merge_traces(
    conn: Connection, deltas: list[TraceDelta]
) -> tuple[dict[str, int], dict[str, Folded], dict[str, StoredTrace]]:
    """Apply every delta and fold it into its trace's run summary, one row version a trace;
    return each trace's step count before this batch, its fold and its row as merged."""
    rows = {delta.trace_id: _trace_row(delta) for delta in deltas}
    # Every trace folded as new first: those that are go in whole, in one statement.
    news = {d.trace_id: _folded(trace_merge.as_new(rows[d.trace_id]), d) for d in deltas}
    inserted = trace_merge.insert_new(
        conn, [rows[d.trace_id] | news[d.trace_id][1] for d in deltas]
    )
    stored_before = trace_merge.read_stored(
        conn, [d.trace_id for d in deltas if d.trace_id not in inserted]
    )
    stored: dict[str, trace_merge.StoredTrace] = {}
    before: dict[str, int] = {}
    folds: dict[str, Folded] = {}
    additions: list[dict[str, Any]] = []
    for delta in deltas:
        trace_id, row = delta.trace_id, rows[delta.trace_id]
        if trace_id in inserted:
            stored[trace_id] = trace_merge.as_new(row)
            folds[trace_id] = news[trace_id][0]
        else:
            merged = stored[trace_id] = trace_merge.with_batch(stored_before[trace_id], row)
            folds[trace_id], values = _folded(merged, delta)
            times = {"started_at": merged.started_at, "updated_at": merged.updated_at}
            additions.append(row | values | times | {"add_tool_ms": values["tool_ms"]})
        before[trace_id] = stored[trace_id].step_count - len(delta.steps)
    trace_merge.add_to_stored(conn, additions)
    replays = [(d.trace_id, d.replay) for d in deltas if d.replay and d.trace_id not in inserted]
    trace_merge.mark_diverged(conn, replays)
    trace_models.record(conn, deltas)
    trace_merge.touch_ancestors(conn, [(d.lineage, d.updated_at) for d in deltas if d.lineage])
    session_summary.record(conn, ((delta, stored[delta.trace_id]) for delta in deltas))
    return before, folds, stored


def _placement(stored: dict[str, StoredTrace]) -> dict[str, datetime]:
    """Each trace's placement, the partition key of its rows on a partitioned store (never
    null there). An unpartitioned store leaves the rows' column null (8 bytes a row saved):
    the trace row keeps its placement, and a conversion places the rows from it."""
    return {trace_id: row.placed_at or row.started_at for trace_id, row in stored.items()}


def _folded(row: trace_merge.StoredTrace, delta: TraceDelta) -> tuple[Folded, dict[str, Any]]:
    """The delta folded into `row` (counts with the batch, summary before it): the fold
    and the column values it sets."""
    first_batch = row.step_count == len(delta.steps)
    folded = fold(row, delta.steps, delta.refusals, first_batch=first_batch)
    known = list(row.models or [])
    # The row lock is held until commit, so `known` cannot go stale.
    models = known + [m for m in delta.models if m not in known]
    values = folded.values | {
        "models": models,
        "session_id": session_summary.session_of(row, delta),
        "tool_ms": folded.tool_ms,
    }
    return folded, values


def _insert_steps(
    conn: Connection,
    written: WrittenBatch,
    seqs: dict[str, int],
    folds: dict[str, Folded],
    placed: Placement,
) -> None:
    step_rows, items = written.steps, written.items
    tool_sets = store_tool_sets(conn, (step for delta in written.traces for step in delta.steps))
    epoch = epoch_for_batch(conn)
    for delta in written.traces:
        tool_ms = folds[delta.trace_id].step_tool_ms
        for offset, record in enumerate(delta.steps, start=1):
            row = step_row(record, seqs[delta.trace_id] + offset)
            extra = {
                "tool_ms": tool_ms.get(record.id),
                "tool_set": tool_sets.get(record.id),
                "key_epoch": epoch,
            }
            step_rows.append(row | extra)
            first = len(items)
            items.extend(item_rows(record.id, "input", record.input_items))
            items.extend(item_rows(record.id, "output", record.output_items))
            for item in items[first:]:
                item["key_epoch"] = epoch
            if placed is not None:
                at = placed[delta.trace_id]
                step_rows[-1]["placed_at"] = at
                for item in items[first:]:
                    item["placed_at"] = at
    insert_many(conn, STEPS, step_rows)
    if written.words:
        fulltext.add_pg_words(items)
    insert_many(conn, ITEMS, items)
    fulltext.index_steps(conn, [row["id"] for row in step_rows])


def _insert_violations(conn: Connection, records: list[Record], placed: Placement) -> None:
    rows: list[dict[str, Any]] = []
    for record in records:
        items: list[dict[str, Any]] | None = None
        if isinstance(record, StepRecord):
            owner, step_id, created = record.id, record.id, record.ended_at
        else:
            owner, step_id, created = _refusal_owner(record), None, record.created_at
            items = [item.to_json() for item in record.items] or None
        keeper = _items_keeper(record.violations)
        for index, violation in enumerate(record.violations):
            rows.append(
                {
                    "id": violation_id(owner, index, violation),
                    "kind": violation.kind.value,
                    "trace_id": record.trace_id,
                    "step_id": step_id,
                    "call_id": violation.call_id,
                    "detail": violation.detail,
                    "enforced": violation.enforced,
                    "created_at": created,
                    "items": items if index == keeper else None,
                }
            )
            if placed is not None:
                rows[-1]["placed_at"] = placed[record.trace_id]
    insert_many(conn, VIOLATIONS, rows)


def _items_keeper(violations: Sequence[Violation]) -> int:
    """Which violation of a refusal keeps its request's items: the enforced one."""
    for index, violation in enumerate(violations):
        if violation.enforced:
            return index
    return 0


def merge_mcp_activity(conn: Connection, activity: Sequence[tuple[str, datetime, int]]) -> None:
    """Runs seen on the MCP side, as (trace id, when, violations): the trace row exists (a run
    with only tool executions is visible) and counts its MCP violations, through the same
    merge and fold as steps, so every violation is counted in one place."""
    deltas: dict[str, TraceDelta] = {}
    for trace_id, at, violations in activity:
        delta = deltas.setdefault(trace_id, TraceDelta(trace_id, at, at))
        delta.started_at, delta.updated_at = min(delta.started_at, at), max(delta.updated_at, at)
        delta.violations += violations
    if deltas:
        _merge_traces(conn, [deltas[trace_id] for trace_id in sorted(deltas)])
