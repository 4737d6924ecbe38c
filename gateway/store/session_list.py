"""The one sessions query, for the read API (GET /api/sessions, paged) and the sessions
page: each session with its trace count, cost and times."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from gateway.store.models import TRACES
from gateway.store.queries import DEFAULT_LIMIT, page, reading
from gateway.store.shapes import cost_usd, iso


def _grouped() -> sa.Subquery:
    """The one sessions query: every session with its traces' counts, cost and times."""
    t = TRACES.c
    return (
        sa.select(
            t.session_id,
            sa.func.count().label("trace_count"),
            sa.func.sum(t.cost_nano).label("cost_nano"),
            sa.func.sum(t.step_count).label("step_count"),
            sa.func.sum(t.total_tokens).label("total_tokens"),
            sa.func.sum(t.violation_count).label("violation_count"),
            sa.func.max(t.updated_at).label("last_activity"),
            sa.func.min(t.started_at).label("started_at"),
        )
        .where(t.session_id.is_not(None))
        .group_by(t.session_id)
        .subquery()
    )


def _rows(engine: Engine, limit: int, cursor: str | None) -> tuple[list[Any], str | None]:
    grouped = _grouped()
    columns = (grouped.c.last_activity, grouped.c.session_id)
    with reading(engine) as conn:
        return page(conn, sa.select(grouped), columns, limit, cursor)


def sessions_page(
    engine: Engine, *, limit: int = DEFAULT_LIMIT, cursor: str | None = None
) -> dict[str, Any]:
    """Sessions with their trace count, cost and times, newest activity first."""
    rows, next_cursor = _rows(engine, limit, cursor)
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


def session_summaries(engine: Engine, *, limit: int = DEFAULT_LIMIT) -> list[dict[str, Any]]:
    """The newest sessions for the sessions page: counts, tokens, violations, cost, times."""
    rows, _ = _rows(engine, limit, None)
    return [
        {
            "session_id": row["session_id"],
            "trace_count": row["trace_count"],
            "step_count": row["step_count"],
            "total_tokens": row["total_tokens"],
            "violation_count": row["violation_count"],
            "started_at": row["started_at"],
            "updated_at": row["last_activity"],
            "cost_usd": cost_usd(_int(row["cost_nano"]), _int(row["step_count"])),
        }
        for row in rows
    ]


def _int(value: Any) -> int:
    """Sums come back as Decimal on PostgreSQL and None over no rows."""
    return int(value or 0)


def _utc(value: Any) -> Any:
    """Aggregates may lose the column type on SQLite: text or naive values are UTC."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value if value is None or value.tzinfo else value.replace(tzinfo=UTC)
