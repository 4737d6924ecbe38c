"""What a trace's detail says of the runs made from its record: its replays."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from gateway.runs.status import DEFAULT_IDLE_SECONDS
from gateway.store.models import TRACES
from gateway.store.read.shapes import iso, trace_status

MAX_REPLAYS = 100  # the newest; a trace replayed more often lists no more


def replays_json(
    conn: Connection,
    trace_id: str,
    now: datetime | None = None,
    idle_seconds: float = DEFAULT_IDLE_SECONDS,
) -> list[dict[str, Any]]:
    """The trace's replays, oldest first, each with where it left the recording (null: it
    did not). Read by the replay_of index."""
    t = TRACES.c
    newest = (
        sa.select(TRACES)
        .where(t.replay_of == trace_id)
        .order_by(t.started_at.desc(), t.id.desc())
        .limit(MAX_REPLAYS)
    )
    rows = list(conn.execute(newest).mappings())
    return [
        {
            "id": row["id"],
            "status": trace_status(row, now, idle_seconds).value,
            "started_at": iso(row["started_at"]),
            "steps": row["step_count"],
            "diverged_at": row["diverged_at"],
        }
        for row in reversed(rows)
    ]
