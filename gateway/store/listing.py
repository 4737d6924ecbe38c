"""Lists beside the traces list: sessions, and the list page's extra facts per trace (last
stop reason, violation kinds)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from gateway.store.models import TRACES, VIOLATIONS
from gateway.store.queries import DEFAULT_LIMIT, page, reading
from gateway.store.shapes import iso, nano_usd


def list_sessions(
    engine: Engine, *, limit: int = DEFAULT_LIMIT, cursor: str | None = None
) -> dict[str, Any]:
    """Sessions with their trace count, cost and times, newest activity first."""
    t = TRACES.c
    grouped = (
        sa.select(
            t.session_id,
            sa.func.count().label("trace_count"),
            sa.func.sum(t.cost_nano).label("cost_nano"),
            sa.func.max(t.updated_at).label("last_activity"),
            sa.func.min(t.started_at).label("started_at"),
        )
        .where(t.session_id.is_not(None))
        .group_by(t.session_id)
        .subquery()
    )
    query = sa.select(grouped)
    columns = (grouped.c.last_activity, grouped.c.session_id)
    with reading(engine) as conn:
        rows, next_cursor = page(conn, query, columns, limit, cursor)
    sessions = [
        {
            "session_id": row["session_id"],
            "trace_count": int(row["trace_count"]),
            "cost_usd": nano_usd(int(row["cost_nano"] or 0)),
            "last_activity": iso(_utc(row["last_activity"])),
            "started_at": iso(_utc(row["started_at"])),
        }
        for row in rows
    ]
    return {"sessions": sessions, "next_cursor": next_cursor}


def _utc(value: Any) -> Any:
    """Aggregates may lose the column type on SQLite: text or naive values are UTC."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value if value is None or value.tzinfo else value.replace(tzinfo=UTC)


def trace_extras(engine: Engine, trace_ids: list[str]) -> dict[str, dict[str, Any]]:
    """Per listed trace: {"last_stop_reason": str | None, "violation_kinds": {kind: count}}."""
    extras: dict[str, dict[str, Any]] = {
        trace_id: {"last_stop_reason": None, "violation_kinds": {}} for trace_id in trace_ids
    }
    if not trace_ids:
        return extras
    t, v = TRACES.c, VIOLATIONS.c
    with engine.connect() as conn:
        for row in conn.execute(sa.select(t.id, t.last_stop_reason).where(t.id.in_(trace_ids))):
            extras[row.id]["last_stop_reason"] = row.last_stop_reason
        counts = conn.execute(
            sa.select(v.trace_id, v.kind, sa.func.count())
            .where(v.trace_id.in_(trace_ids))
            .group_by(v.trace_id, v.kind)
            .order_by(v.kind)
        ).all()
    for trace_id, kind, count in counts:
        extras[trace_id]["violation_kinds"][kind] = count
    return extras
