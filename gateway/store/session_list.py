"""The read API's sessions: each with its trace count, cost and times (GET /api/sessions)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from gateway.store.models import TRACES
from gateway.store.queries import DEFAULT_LIMIT, page, reading
from gateway.store.shapes import cost_usd, iso


def sessions_page(
    engine: Engine, *, limit: int = DEFAULT_LIMIT, cursor: str | None = None
) -> dict[str, Any]:
    """Sessions with their trace count, cost and times, newest activity first."""
    t = TRACES.c
    grouped = (
        sa.select(
            t.session_id,
            sa.func.count().label("trace_count"),
            sa.func.sum(t.cost_nano).label("cost_nano"),
            sa.func.sum(t.step_count).label("step_count"),
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
            "cost_usd": cost_usd(_int(row["cost_nano"]), _int(row["step_count"])),
            "last_activity": iso(_utc(row["last_activity"])),
            "started_at": iso(_utc(row["started_at"])),
        }
        for row in rows
    ]
    return {"sessions": sessions, "next_cursor": next_cursor}


def _int(value: Any) -> int:
    """Sums come back as Decimal on PostgreSQL and None over no rows."""
    return int(value or 0)


def _utc(value: Any) -> Any:
    """Aggregates may lose the column type on SQLite: text or naive values are UTC."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value if value is None or value.tzinfo else value.replace(tzinfo=UTC)
