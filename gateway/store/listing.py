"""Extra read-side facts for the traces list page: last stop reason and violation kinds."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from gateway.store.models import TRACES, VIOLATIONS


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
