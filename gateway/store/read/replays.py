"""What a trace's detail says of the runs made from its record: its replays and forks."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from gateway.runs.status import DEFAULT_IDLE_SECONDS
from gateway.store.models import TRACES
from gateway.store.read.shapes import iso, trace_json, trace_status

MAX_REPLAYS = 100  # the newest; a trace replayed (or forked) more often lists no more


def made_from_json(
    conn: Connection,
    trace_id: str,
    now: datetime | None = None,
    idle_seconds: float = DEFAULT_IDLE_SECONDS,
) -> dict[str, list[dict[str, Any]]]:
    """A trace detail's `replays` and `forks`."""
    return {
        "replays": replays_json(conn, trace_id, now, idle_seconds),
        "forks": forks_json(conn, trace_id, now, idle_seconds),
    }


def replays_json(
    conn: Connection,
    trace_id: str,
    now: datetime | None = None,
    idle_seconds: float = DEFAULT_IDLE_SECONDS,
) -> list[dict[str, Any]]:
    """The trace's replays, oldest first, each with where it left the recording (null: it
    did not). Read by the replay_of index."""
    rows = _newest(conn, TRACES.c.replay_of, trace_id)
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


def forks_json(
    conn: Connection,
    trace_id: str,
    now: datetime | None = None,
    idle_seconds: float = DEFAULT_IDLE_SECONDS,
) -> list[dict[str, Any]]:
    """The trace's forks, oldest first, each with the step it forks and the model it asked.
    Read by the fork_of index."""
    rows = _newest(conn, TRACES.c.fork_of, trace_id)
    return [
        {
            "id": row["id"],
            "status": trace_status(row, now, idle_seconds).value,
            "started_at": iso(row["started_at"]),
            "fork_at": row["fork_at"],
            "models": list(row["models"] or []),
        }
        for row in reversed(rows)
    ]


def made_from(conn: Connection, trace_id: str) -> int:
    """How many replays and forks the trace has (by the two links' indexes)."""
    t = TRACES.c
    count = sa.func.count()
    replayed = conn.execute(sa.select(count).where(t.replay_of == trace_id)).scalar_one()
    forked = conn.execute(sa.select(count).where(t.fork_of == trace_id)).scalar_one()
    return int(replayed) + int(forked)


def page_key(
    engine: Engine,
    trace_id: str,
    now: datetime | None = None,
    idle_seconds: float = DEFAULT_IDLE_SECONDS,
) -> dict[str, Any] | None:
    """The trace as listed, and how many runs were made from it: what its page is cached
    under, since a replay or a fork changes its page but not its row."""
    with engine.connect() as conn:
        row = conn.execute(sa.select(TRACES).where(TRACES.c.id == trace_id)).mappings().first()
        made = made_from(conn, trace_id) if row is not None else 0
    return None if row is None else trace_json(row, now, idle_seconds) | {"made_from": made}


def _newest(conn: Connection, link: Any, trace_id: str) -> list[Any]:
    """The newest MAX_REPLAYS traces whose `link` names the trace (by its index)."""
    t = TRACES.c
    query = (
        sa.select(TRACES)
        .where(link == trace_id)
        .order_by(t.started_at.desc(), t.id.desc())
        .limit(MAX_REPLAYS)
    )
    return list(conn.execute(query).mappings())
