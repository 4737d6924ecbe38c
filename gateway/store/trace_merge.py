"""The trace rows of a batch at the driver: one multi-row upsert that adds the batch's counts
and returns each row's stored run summary, then one executemany setting the folded summary.

Plain SQL both dialects share (`ON CONFLICT … DO UPDATE`, `excluded`, `RETURNING`), with
values converted here as the column types would: no statement compiled per batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple

from sqlalchemy.engine import Connection

from gateway import jsoncodec
from gateway.store import session_summary
from gateway.store.models import TRACES
from gateway.store.rows import converter, placeholder

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
)
_MERGED = ", ".join(
    [f"{name} = traces.{name} + excluded.{name}" for name in _ADDED]
    + [
        "started_at = CASE WHEN excluded.started_at < traces.started_at "
        "THEN excluded.started_at ELSE traces.started_at END",
        "updated_at = CASE WHEN excluded.updated_at > traces.updated_at "
        "THEN excluded.updated_at ELSE traces.updated_at END",
        "budget_max_steps = coalesce(excluded.budget_max_steps, traces.budget_max_steps)",
        "budget_max_tokens = coalesce(excluded.budget_max_tokens, traces.budget_max_tokens)",
    ]
)
# The session is left as stored (the fold sets it), so session_summary sees a trace join it.
# `placed_at` is set when the row is made and never merged: every batch of a trace places
# its rows where the first did (gateway.store.partitions).
_RETURNED = (
    "id",
    "step_count",
    "models",
    *SUMMARY_COLUMNS,
    *session_summary.RETURNED,
    "placed_at",
)
FOLDED_COLUMNS = (*SUMMARY_COLUMNS, "status", "status_final", "models", "span_ms", "session_id")
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
    """A trace row as the merge returned it: counts after the batch, summary before it."""

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


def merge(conn: Connection, rows: Sequence[dict[str, Any]]) -> dict[str, StoredTrace]:
    """Insert or add to every trace row of a batch in one statement; id → stored row.

    The row lock it takes orders concurrent replicas, and the increments make counters
    exact; it leaves the run summary alone, so RETURNING gives it as before the batch."""
    mark = placeholder(conn)
    convert = [converter(conn, TRACES.c[name].type) for name in _INSERTED]
    one = "(" + ", ".join([mark] * len(_INSERTED)) + ")"
    sql = (
        f"INSERT INTO traces ({', '.join(_INSERTED)}) VALUES {', '.join([one] * len(rows))} "
        f"ON CONFLICT (id) DO UPDATE SET {_MERGED} RETURNING {', '.join(_RETURNED)}"
    )
    values = [f(row[name]) for row in rows for f, name in zip(convert, _INSERTED, strict=True)]
    returned = conn.exec_driver_sql(sql, tuple(values)).all()
    return {row[0]: _stored(row) for row in returned}


def set_folded(conn: Connection, updates: Sequence[dict[str, Any]]) -> None:
    """The folded run summary of each trace (FOLDED_COLUMNS, `add_tool_ms`, `trace_id`)."""
    mark = placeholder(conn)
    assigned = ", ".join(f"{name} = {mark}" for name in FOLDED_COLUMNS)
    sql = f"UPDATE traces SET {assigned}, tool_ms = tool_ms + {mark} WHERE id = {mark}"
    convert = [converter(conn, TRACES.c[name].type) for name in FOLDED_COLUMNS]
    values = [
        (
            *(f(row[name]) for f, name in zip(convert, FOLDED_COLUMNS, strict=True)),
            row["add_tool_ms"],
            row["trace_id"],
        )
        for row in updates
    ]
    conn.exec_driver_sql(sql, values)


def _stored(row: Sequence[Any]) -> StoredTrace:
    named = dict(zip(_RETURNED, row, strict=True))
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
