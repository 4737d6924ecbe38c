"""Trees of runs (sub-agents): a run's place, its parent and children, and the totals of a
whole tree. A trace stored before revision 0017 has no root: it is its own."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine, RowMapping

from gateway.runs.status import DEFAULT_IDLE_SECONDS
from gateway.step import Lineage
from gateway.store.models import TRACES
from gateway.store.read.shapes import cost_usd, ms_between, trace_status

MAX_CHILDREN = 500  # a run's children listed on its page, oldest first


def root_of(row: RowMapping) -> str:
    return str(row["root_trace_id"] or row["id"])


def lineage_of(engine: Engine, trace_id: str) -> Lineage | None:
    """A stored run's place in its tree; None when it is not stored."""
    t = TRACES.c
    query = sa.select(t.id, t.root_trace_id, t.depth, t.parent_trace_id, t.parent_call_id)
    with engine.connect() as conn:
        row = conn.execute(query.where(t.id == trace_id)).mappings().first()
    if row is None:
        return None
    return Lineage(root_of(row), row["depth"], row["parent_trace_id"], row["parent_call_id"])


def place_json(
    conn: Connection,
    row: RowMapping,
    now: datetime | None = None,
    idle_seconds: float = DEFAULT_IDLE_SECONDS,
) -> dict[str, Any]:
    """What a trace's detail says of its tree: parent, children, root, depth, tree totals."""
    parent = None
    if row["parent_trace_id"] is not None:
        parent = {"id": row["parent_trace_id"], "call_id": row["parent_call_id"]}
    t = TRACES.c
    children = conn.execute(
        sa.select(TRACES)
        .where(t.parent_trace_id == row["id"])
        .order_by(t.started_at, t.id)
        .limit(MAX_CHILDREN)
    ).mappings()
    root = root_of(row)
    return {
        "parent": parent,
        "children": [child_json(child, now, idle_seconds) for child in children],
        "root_trace_id": root,
        "depth": row["depth"],
        "tree": tree_totals(conn, [root]).get(root, EMPTY),
    }


def child_json(
    row: RowMapping, now: datetime | None = None, idle_seconds: float = DEFAULT_IDLE_SECONDS
) -> dict[str, Any]:
    """A child run as its parent shows it, with the call that started it."""
    return {
        "id": row["id"],
        "status": trace_status(row, now, idle_seconds).value,
        "steps": row["step_count"],
        "cost": cost_usd(row["cost_nano"], row["step_count"]),
        "duration": ms_between(row["started_at"], row["last_response_end"]),
        "call_id": row["parent_call_id"],
    }


EMPTY: dict[str, Any] = {
    "traces": 0,
    "steps": 0,
    "input_tokens": 0,
    "output_tokens": 0,
    "cost": None,
    "duration": None,
}


def tree_totals(conn: Connection, roots: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Each root's whole tree summed: runs, steps, tokens, cost, and the time from its first
    request to its last response's end. One query for a page of roots."""
    if not roots:
        return {}
    t = TRACES.c
    root = sa.func.coalesce(t.root_trace_id, t.id)
    query = (
        sa.select(
            root.label("root"),
            sa.func.count().label("traces"),
            sa.func.sum(t.step_count).label("steps"),
            sa.func.sum(t.prompt_tokens).label("input_tokens"),
            sa.func.sum(t.completion_tokens).label("output_tokens"),
            sa.func.sum(t.cost_nano).label("cost_nano"),
            sa.func.min(t.started_at).label("started_at"),
            sa.func.max(t.last_response_end).label("ended_at"),
        )
        .where(sa.or_(t.root_trace_id.in_(list(roots)), t.id.in_(list(roots))))
        .group_by(root)
    )
    totals = {}
    for row in conn.execute(query).mappings():
        steps = int(row["steps"] or 0)
        totals[row["root"]] = {
            "traces": int(row["traces"]),
            "steps": steps,
            "input_tokens": int(row["input_tokens"] or 0),
            "output_tokens": int(row["output_tokens"] or 0),
            "cost": cost_usd(int(row["cost_nano"] or 0), steps),
            "duration": ms_between(_aware(row["started_at"]), _aware(row["ended_at"])),
        }
    return totals


def _aware(value: Any) -> datetime | None:
    """min/max of a UTCDateTime column come back untyped on SQLite (text) and naive."""
    if value is None:
        return None
    when = datetime.fromisoformat(value) if isinstance(value, str) else value
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)
