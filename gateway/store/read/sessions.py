"""The one sessions query, for the read API (GET /api/sessions, paged) and the sessions
page: each session with its trace count, cost and times, read from the summary the writer
keeps (gateway.store.write.session_summary), newest activity first."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine, RowMapping

from gateway.store.models import SESSIONS
from gateway.store.read.queries import DEFAULT_LIMIT, page, reading
from gateway.store.read.shapes import cost_usd, iso


def _rows(engine: Engine, limit: int, cursor: str | None) -> tuple[list[RowMapping], str | None]:
    s = SESSIONS.c
    with reading(engine) as conn:
        return page(conn, sa.select(SESSIONS), (s.last_activity, s.session_id), limit, cursor)


def sessions_page(
    engine: Engine, *, limit: int = DEFAULT_LIMIT, cursor: str | None = None
) -> dict[str, Any]:
    """Sessions with their trace count, cost and times, newest activity first."""
    rows, next_cursor = _rows(engine, limit, cursor)
    sessions = [
        {
            "session_id": row["session_id"],
            "trace_count": row["trace_count"],
            "cost_usd": cost_usd(row["cost_nano"], row["step_count"]),
            "last_activity": iso(row["last_activity"]),
            "started_at": iso(row["started_at"]),
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
            "cost_usd": cost_usd(row["cost_nano"], row["step_count"]),
        }
        for row in rows
    ]
