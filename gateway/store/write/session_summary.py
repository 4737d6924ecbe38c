"""The sessions summary: a row per session with its traces' count, steps, tokens, violations,
cost, first and last activity. The writer adds each batch to it and retention takes purged
traces out, so the sessions list reads a page of rows instead of grouping every trace.

Exact under replicas: a session row changes only by increments (and by min/max of times)
under its row lock, taken after the batch's trace rows and in session id order.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from gateway.store.models import SESSIONS, TRACES
from gateway.store.write.rows import converter, placeholder

# Trace columns the writer's merge returns for this module (besides step_count), as they
# are after the merge: a trace joining a session brings all it has.
RETURNED = (
    "session_id",
    "started_at",
    "updated_at",
    "total_tokens",
    "violation_count",
    "cost_nano",
)
_SUMS = ("trace_count", "step_count", "total_tokens", "violation_count", "cost_nano")
_COLUMNS = (*_SUMS, "started_at", "last_activity")


class TraceChange(Protocol):
    """What one batch adds to one trace (the writer's delta)."""

    @property
    def session_id(self) -> str | None: ...
    @property
    def steps(self) -> Sequence[Any]: ...
    @property
    def tokens(self) -> dict[str, int]: ...
    @property
    def violations(self) -> int: ...
    @property
    def cost_nano(self) -> int: ...
    @property
    def started_at(self) -> datetime: ...
    @property
    def updated_at(self) -> datetime: ...


@dataclass(slots=True)
class _Sums:
    trace_count: int
    step_count: int
    total_tokens: int
    violation_count: int
    cost_nano: int
    started_at: datetime
    last_activity: datetime

    def add(self, other: _Sums) -> None:
        for name in _SUMS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.started_at = min(self.started_at, other.started_at)
        self.last_activity = max(self.last_activity, other.last_activity)


def session_of(row: Any, delta: TraceChange) -> str | None:
    """The trace's session after the batch: the first one it was seen with stays."""
    session: str | None = row.session_id or delta.session_id
    return session


def record(conn: Connection, changes: Iterable[tuple[TraceChange, Any]]) -> None:
    """Add a batch to the summary: (delta, merged trace row) per trace, the row's session
    as stored before the batch (the writer sets it after this)."""
    sessions: dict[str, _Sums] = {}
    for delta, row in changes:
        if row.session_id is not None:
            _into(sessions, row.session_id, _delta_sums(delta))
        elif delta.session_id is not None:  # the trace joins its session now, whole
            _into(sessions, delta.session_id, _trace_sums(row))
    if sessions:  # at the driver: no statement compiled per batch
        convert = [converter(conn, SESSIONS.c[name].type) for name in _COLUMNS]
        rows = [
            (s, *(f(getattr(sums, name)) for f, name in zip(convert, _COLUMNS, strict=True)))
            for s, sums in sorted(sessions.items())
        ]
        conn.exec_driver_sql(_upsert_sql(placeholder(conn)), rows)


def _into(sessions: dict[str, _Sums], session_id: str, sums: _Sums) -> None:
    if session_id in sessions:
        sessions[session_id].add(sums)
    else:
        sessions[session_id] = sums


def _delta_sums(delta: TraceChange) -> _Sums:
    return _Sums(
        trace_count=0,
        step_count=len(delta.steps),
        total_tokens=delta.tokens.get("total_tokens", 0),
        violation_count=delta.violations,
        cost_nano=delta.cost_nano,
        started_at=delta.started_at,
        last_activity=delta.updated_at,
    )


def _trace_sums(row: Any) -> _Sums:
    return _Sums(
        trace_count=1,
        step_count=int(row.step_count),
        total_tokens=int(row.total_tokens),
        violation_count=int(row.violation_count),
        cost_nano=int(row.cost_nano),
        started_at=row.started_at,
        last_activity=row.updated_at,
    )


def _upsert_sql(mark: str) -> str:
    """Add a batch's sums to each session's row (made by the first trace that joins it)."""
    merged = [f"{name} = sessions.{name} + excluded.{name}" for name in _SUMS] + [
        "started_at = CASE WHEN excluded.started_at < sessions.started_at "
        "THEN excluded.started_at ELSE sessions.started_at END",
        "last_activity = CASE WHEN excluded.last_activity > sessions.last_activity "
        "THEN excluded.last_activity ELSE sessions.last_activity END",
    ]
    return (
        f"INSERT INTO sessions (session_id, {', '.join(_COLUMNS)}) "
        f"VALUES ({', '.join([mark] * (1 + len(_COLUMNS)))}) "
        f"ON CONFLICT (session_id) DO UPDATE SET {', '.join(merged)}"
    )


def gone(conn: Connection, trace_ids: Sequence[str]) -> list[Any]:
    """What traces retention is about to delete take from their sessions, a row a session
    (session_id and the sums), in session id order: read before the trace rows go."""
    t = TRACES.c
    return list(
        conn.execute(
            sa.select(
                t.session_id,
                sa.func.count().label("trace_count"),
                *(sa.func.sum(t[name]).label(name) for name in _SUMS[1:]),
            )
            .where(t.id.in_(trace_ids), t.session_id.is_not(None))
            .group_by(t.session_id)
            .order_by(t.session_id)
        ).all()
    )


def take_out(conn: Connection, gone_rows: Sequence[Any]) -> None:
    """Take `gone(...)` out of the sessions once the trace rows are deleted (same
    transaction): counts go down and times are read again from the traces that stay, in one
    statement a session (sent together), then a session left with no trace goes."""
    if not gone_rows:
        return
    t, s = TRACES.c, SESSIONS.c
    staying = t.session_id == s.session_id
    first = sa.select(sa.func.min(t.started_at)).where(staying).scalar_subquery()
    last = sa.select(sa.func.max(t.updated_at)).where(staying).scalar_subquery()
    less = {name: s[name] - sa.bindparam(f"less_{name}", type_=s[name].type) for name in _SUMS}
    # Kept as they were should no trace stay (rows deleted by hand): never a null time.
    times = {
        "started_at": sa.func.coalesce(first, s.started_at),
        "last_activity": sa.func.coalesce(last, s.last_activity),
    }
    conn.execute(
        SESSIONS.update().where(s.session_id == sa.bindparam("sid")).values(**less, **times),
        [
            {"sid": g.session_id, **{f"less_{n}": int(getattr(g, n) or 0) for n in _SUMS}}
            for g in gone_rows
        ],
    )
    affected = [g.session_id for g in gone_rows]
    conn.execute(SESSIONS.delete().where(s.session_id.in_(affected), s.trace_count <= 0))
