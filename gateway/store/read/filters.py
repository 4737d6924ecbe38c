"""The traces list's filters as SQL conditions on TRACES, each served by an index where the
list is large: status by its time-free split (gateway.runs.status), models by trace_models,
session, last activity, search.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa

from gateway.runs.status import TraceStatus
from gateway.store.mcp_tables import MCP_VIOLATIONS
from gateway.store.models import TRACES, VIOLATIONS


@dataclass(frozen=True, slots=True)
class TraceFilters:
    """Every filter of GET /api/traces; None: not filtered on."""

    status: str | None = None  # a TraceStatus value
    model: str | None = None  # substring of a model name, any case
    violation: str | None = None  # a violation kind the trace has
    has_violations: bool | None = None
    session: str | None = None
    since: datetime | None = None  # last activity at or after
    until: datetime | None = None  # last activity at or before
    q: str | None = None  # gateway.store.read.search: applied by queries.list_traces
    # Sub-agents' runs too: by default the list holds roots (a search finds any run).
    include_children: bool | None = None

    def merged(self, **values: Any) -> TraceFilters:
        return replace(self, **{k: v for k, v in values.items() if v is not None})


def trace_conditions(
    filters: TraceFilters,
    dialect: str,
    now: datetime,
    idle_seconds: float,
    models: Any = None,
    below: datetime | None = None,
) -> list[Any]:
    """`models`: the condition of `filters.model`, which reads the store to be shaped
    (trace_models.filter_on). `below`: the last activity of the newest-first list's cursor;
    a ceiling on the last activity it already implies is left out, so the database starts
    its index scan at the cursor instead of at the ceiling (two bounds it cannot compare)."""
    t = TRACES.c
    conditions: list[Any] = []
    if not filters.include_children and not filters.q:
        conditions.append(t.parent_trace_id.is_(None))
    if filters.status:
        status = TraceStatus(filters.status)
        conditions.append(status_condition(status, now, idle_seconds, below))
    if filters.model:
        conditions.append(sa.false() if models is None else models)
    if filters.violation:  # either side's: the MCP side's count in violation_count too
        v, m = VIOLATIONS.c, MCP_VIOLATIONS.c
        model_side = sa.exists().where(v.trace_id == t.id, v.kind == filters.violation)
        mcp_side = sa.exists().where(m.trace_id == t.id, m.kind == filters.violation)
        conditions.append(sa.or_(model_side, mcp_side))
    if filters.has_violations is not None:
        count = t.violation_count
        conditions.append(count > 0 if filters.has_violations else count == 0)
    if filters.session:
        conditions.append(t.session_id == filters.session)
    if filters.since is not None:
        conditions.append(t.updated_at >= filters.since)
    if filters.until is not None and not _implied(filters.until, below):
        conditions.append(t.updated_at <= filters.until)
    return conditions


def status_condition(
    status: TraceStatus, now: datetime, idle_seconds: float, below: datetime | None = None
) -> Any:
    """The SQL twin of trace_status.status_at, per status, with cut = now - idle."""
    t = TRACES.c
    cut = now - timedelta(seconds=idle_seconds)
    if status is TraceStatus.RUNNING:
        return sa.and_(t.status_final.is_(False), t.updated_at > cut)
    if status is TraceStatus.ABANDONED:
        if _implied(cut, below):
            return t.status == status.value
        return sa.and_(t.status == status.value, t.updated_at <= cut)
    if status is TraceStatus.COMPLETED:
        return sa.and_(
            t.status == status.value, sa.or_(t.status_final.is_(True), t.updated_at <= cut)
        )
    return t.status == status.value


def _implied(ceiling: datetime, below: datetime | None) -> bool:
    """Whether `updated_at <= ceiling` holds for every row the cursor's seek reads."""
    return below is not None and _utc(below) <= _utc(ceiling)


def _utc(when: datetime) -> datetime:
    return when if when.tzinfo else when.replace(tzinfo=UTC)
