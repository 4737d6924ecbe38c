"""Batched writes of step and refusal records: one transaction a batch, exact under replicas.

Trace counters change only by atomic increments under the trace row's lock, so several
gateways sharing PostgreSQL keep them exact; a retried batch never writes a record twice.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Connection, Engine

from gateway import jsoncodec
from gateway.items import Item, StopReason, Violation
from gateway.step import RefusalRecord, StepRecord
from gateway.store.engine import dialect_insert, write_connection
from gateway.store.models import ITEMS, STEPS, TRACES, VIOLATIONS, UTCDateTime

Record = StepRecord | RefusalRecord

STATUS_OK = "ok"
STATUS_ERROR = "error"
STATUS_BUDGET = "budget_exceeded"
_ERROR_STOPS = frozenset({StopReason.ERROR, StopReason.INTERRUPTED})
_TOKEN_SUMS = (
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "cached_tokens",
    "reasoning_tokens",
)
# Summed as reported; total_tokens falls back to prompt + completion when not reported.
_SUMMED_AS_IS = ("prompt_tokens", "completion_tokens", "cached_tokens", "reasoning_tokens")


def is_transient(exc: BaseException) -> bool:
    """Whether retrying the same batch later may succeed (database down, locked, slow)."""
    if isinstance(exc, sa_exc.DBAPIError) and exc.connection_invalidated:
        return True
    transient = (sa_exc.OperationalError, sa_exc.InterfaceError, sa_exc.TimeoutError, OSError)
    return isinstance(exc, transient)


@dataclass(slots=True)
class _TraceDelta:
    """What one batch adds to one trace."""

    trace_id: str
    started_at: datetime
    updated_at: datetime
    steps: list[StepRecord] = field(default_factory=list)
    tokens: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_TOKEN_SUMS, 0))
    violations: int = 0
    models: list[str] = field(default_factory=list)
    step_status: str | None = None
    budget_exceeded: bool = False
    last_stop_reason: str | None = None
    budget: dict[str, int] = field(default_factory=dict)

    def add_step(self, record: StepRecord) -> None:
        self.steps.append(record)
        self._widen(record.started_at, step_end(record))
        usage = record.usage
        for name in _SUMMED_AS_IS:
            self.tokens[name] += getattr(usage, name) or 0
        self.tokens["total_tokens"] += usage.total()
        if record.model and record.model not in self.models:
            self.models.append(record.model)
        self.step_status = STATUS_ERROR if record.stop_reason in _ERROR_STOPS else STATUS_OK
        self.last_stop_reason = record.stop_reason.value
        self.violations += len(record.violations)
        self._set_budget(record.budget_max_steps, record.budget_max_tokens)

    def add_refusal(self, record: RefusalRecord) -> None:
        self._widen(record.created_at, record.created_at)
        self.violations += len(record.violations)
        self.budget_exceeded = self.budget_exceeded or record.budget_exceeded
        self._set_budget(record.budget_max_steps, record.budget_max_tokens)

    def _widen(self, start: datetime, end: datetime) -> None:
        self.started_at = min(self.started_at, start)
        self.updated_at = max(self.updated_at, end)

    def _set_budget(self, max_steps: int | None, max_tokens: int | None) -> None:
        if max_steps is not None:
            self.budget["budget_max_steps"] = max_steps
        if max_tokens is not None:
            self.budget["budget_max_tokens"] = max_tokens


def step_end(record: StepRecord) -> datetime:
    """When the step finished: what orders traces newest first."""
    if record.latency_ms is None:
        return record.started_at
    return record.started_at + timedelta(milliseconds=record.latency_ms)


def violation_id(owner: str, index: int, violation: Violation) -> str:
    """Deterministic, so a batch retried after an unseen commit inserts nothing twice."""
    material = "\x00".join(
        [owner, str(index), violation.kind.value, violation.call_id or "", violation.detail]
    )
    return "v_" + hashlib.sha256(material.encode()).hexdigest()[:32]


def _refusal_owner(record: RefusalRecord) -> str:
    return f"refusal\x00{record.trace_id}\x00{record.created_at.isoformat()}"


class StoreWriter:
    """Writes batches of records; sync, meant for one dedicated worker thread."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def write_batch(self, records: Sequence[Record]) -> None:
        if not records:
            return
        with write_connection(self._engine) as conn, conn.begin():
            fresh = _unwritten(conn, records)
            if not fresh:
                return
            deltas = _group(fresh)
            seqs = _merge_traces(conn, deltas)
            _insert_steps(conn, deltas, seqs)
            _insert_violations(conn, fresh)


def _unwritten(conn: Connection, records: Sequence[Record]) -> list[Record]:
    """Drop records already stored (a retry after a commit whose answer was lost)."""
    step_ids = [r.id for r in records if isinstance(r, StepRecord)]
    refusal_ids = [
        violation_id(_refusal_owner(r), 0, r.violations[0])
        for r in records
        if isinstance(r, RefusalRecord) and r.violations
    ]
    stored: set[str] = set()
    if step_ids:
        stored.update(conn.scalars(sa.select(STEPS.c.id).where(STEPS.c.id.in_(step_ids))))
    if refusal_ids:
        query = sa.select(VIOLATIONS.c.id).where(VIOLATIONS.c.id.in_(refusal_ids))
        stored.update(conn.scalars(query))
    fresh: list[Record] = []
    for record in records:
        if isinstance(record, StepRecord):
            key = record.id
        elif record.violations:
            key = violation_id(_refusal_owner(record), 0, record.violations[0])
        else:
            key = ""
        if key in stored:
            continue
        if key:
            stored.add(key)  # the same record twice in one batch is written once
        fresh.append(record)
    return fresh


def _group(records: list[Record]) -> list[_TraceDelta]:
    """One delta per trace, sorted by trace id: every writer locks rows in the same order,
    so concurrent replicas cannot deadlock."""
    deltas: dict[str, _TraceDelta] = {}
    for record in records:
        when = record.started_at if isinstance(record, StepRecord) else record.created_at
        delta = deltas.get(record.trace_id)
        if delta is None:
            delta = deltas[record.trace_id] = _TraceDelta(record.trace_id, when, when)
        if isinstance(record, StepRecord):
            delta.add_step(record)
        else:
            delta.add_refusal(record)
    return [deltas[trace_id] for trace_id in sorted(deltas)]


def _trace_row(delta: _TraceDelta) -> dict[str, Any]:
    """The trace row as this batch alone would make it; merged into an existing row."""
    status = STATUS_BUDGET if delta.budget_exceeded else (delta.step_status or STATUS_OK)
    return {
        "id": delta.trace_id,
        "started_at": delta.started_at,
        "updated_at": delta.updated_at,
        "status": status,
        "step_count": len(delta.steps),
        "models": delta.models,
        **delta.tokens,
        "violation_count": delta.violations,
        "last_stop_reason": delta.last_stop_reason,
        "budget_max_steps": delta.budget.get("budget_max_steps"),
        "budget_max_tokens": delta.budget.get("budget_max_tokens"),
    }


def _merge(conn: Connection) -> Any:
    """INSERT … ON CONFLICT DO UPDATE adding the batch's counts to the stored ones.

    One statement for every trace of a batch: the row lock it takes orders concurrent
    replicas, and the increments make counters exact. budget_exceeded is sticky; a batch
    without steps (refusals only) leaves the status and last stop reason as they were.
    """
    t, new = TRACES.c, dialect_insert(conn, TRACES).excluded
    status = sa.case(
        (t.status == STATUS_BUDGET, t.status),
        (new.status == STATUS_BUDGET, new.status),
        (new.last_stop_reason.is_(None), t.status),
        else_=new.status,
    )
    merged: dict[str, Any] = {
        "step_count": t.step_count + new.step_count,
        "violation_count": t.violation_count + new.violation_count,
        **{name: t[name] + new[name] for name in _TOKEN_SUMS},
        "started_at": sa.case((new.started_at < t.started_at, new.started_at), else_=t.started_at),
        "updated_at": sa.case((new.updated_at > t.updated_at, new.updated_at), else_=t.updated_at),
        "status": status,
        "last_stop_reason": sa.func.coalesce(new.last_stop_reason, t.last_stop_reason),
        "budget_max_steps": sa.func.coalesce(new.budget_max_steps, t.budget_max_steps),
        "budget_max_tokens": sa.func.coalesce(new.budget_max_tokens, t.budget_max_tokens),
    }
    upsert = dialect_insert(conn, TRACES).on_conflict_do_update(index_elements=["id"], set_=merged)
    return upsert.returning(t.id, t.step_count, t.models, sort_by_parameter_order=True)


def _merge_traces(conn: Connection, deltas: list[_TraceDelta]) -> dict[str, int]:
    """Apply every delta; return each trace's step count before this batch."""
    rows = conn.execute(_merge(conn), [_trace_row(d) for d in deltas]).all()
    before: dict[str, int] = {}
    for delta, row in zip(deltas, rows, strict=True):
        before[delta.trace_id] = int(row.step_count) - len(delta.steps)
        stored = list(row.models or [])
        added = [m for m in delta.models if m not in stored]
        if added:  # the row lock is held until commit, so `stored` cannot go stale
            update = TRACES.update().where(TRACES.c.id == delta.trace_id)
            conn.execute(update.values(models=stored + added))
    return before


def _insert_steps(conn: Connection, deltas: list[_TraceDelta], seqs: dict[str, int]) -> None:
    step_rows: list[dict[str, Any]] = []
    item_rows: list[dict[str, Any]] = []
    for delta in deltas:
        for offset, record in enumerate(delta.steps, start=1):
            step_rows.append(_step_row(record, seqs[delta.trace_id] + offset))
            item_rows.extend(_item_rows(record.id, "input", record.input_items))
            item_rows.extend(_item_rows(record.id, "output", record.output_items))
    _insert_many(conn, STEPS, step_rows)
    _insert_many(conn, ITEMS, item_rows)


def _insert_many(conn: Connection, table: sa.Table, rows: list[dict[str, Any]]) -> None:
    """One driver-level executemany: the rows of a batch skip SQLAlchemy's per-row
    compilation and type processing (values are converted here, as those types would)."""
    if not rows:
        return
    columns = list(rows[0])
    mark = "?" if conn.dialect.name == "sqlite" else "%s"
    sql = (
        f"INSERT INTO {table.name} ({', '.join(columns)}) "
        f"VALUES ({', '.join([mark] * len(columns))})"
    )
    convert = [_converter(conn, table.c[name].type) for name in columns]
    values = [tuple(f(row[c]) for f, c in zip(convert, columns, strict=True)) for row in rows]
    conn.exec_driver_sql(sql, values)


def _same(value: Any) -> Any:
    return value


def _json(value: Any) -> str:
    # Like sa.JSON: None is stored as JSON null, not SQL NULL.
    return jsoncodec.dumps_text(value)


def _sqlite_time(value: datetime) -> str:
    # UTCDateTime's naive UTC, in SQLAlchemy's SQLite DATETIME text format.
    return _utc(value).strftime("%Y-%m-%d %H:%M:%S.%f")


def _utc(value: datetime) -> datetime:
    return value if value.tzinfo is None else value.astimezone(UTC).replace(tzinfo=None)


def _converter(conn: Connection, column_type: Any) -> Any:
    if isinstance(column_type, sa.JSON):
        return _json
    if isinstance(column_type, UTCDateTime):
        return _sqlite_time if conn.dialect.name == "sqlite" else _utc
    return _same


def _step_row(record: StepRecord, seq: int) -> dict[str, Any]:
    usage = record.usage
    return {
        "id": record.id,
        "trace_id": record.trace_id,
        "seq": seq,
        "protocol": record.protocol,
        "method": record.method,
        "path": record.path,
        "model": record.model,
        "stream": record.stream,
        "http_status": record.http_status,
        "stop_reason": record.stop_reason.value,
        "raw_stop_reason": record.raw_stop_reason,
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
        "cached_tokens": usage.cached_tokens,
        "reasoning_tokens": usage.reasoning_tokens,
        "cache_creation_tokens": usage.cache_creation_tokens,
        "provider_request_id": record.provider_request_id,
        "response_id": record.response_id,
        "started_at": record.started_at,
        "latency_ms": record.latency_ms,
        "ttft_ms": record.ttft_ms,
        "error": record.error,
        "continuation_key": record.continuation_key,
    }


def _item_rows(step_id: str, direction: str, items: list[Item]) -> list[dict[str, Any]]:
    return [
        {
            "step_id": step_id,
            "direction": direction,
            "position": position,
            "kind": item.kind.value,
            "role": item.role,
            "text": item.text,
            "call_id": item.call_id,
            "tool_name": item.tool_name,
            "arguments": item.arguments,
            "is_error": item.is_error,
            "attrs": item.attrs,
        }
        for position, item in enumerate(items)
    ]


def _insert_violations(conn: Connection, records: list[Record]) -> None:
    rows: list[dict[str, Any]] = []
    for record in records:
        if isinstance(record, StepRecord):
            owner, step_id, created = record.id, record.id, step_end(record)
        else:
            owner, step_id, created = _refusal_owner(record), None, record.created_at
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
                }
            )
    _insert_many(conn, VIOLATIONS, rows)
