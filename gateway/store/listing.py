"""The traces list's filters, sort orders and per-row extras (first user text, refusals).

Columns a store may not have yet (session, cost, duration) are used when the table has them.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine, RowMapping

from gateway.store import cursor as cursor_codec
from gateway.store.models import ITEMS, STEPS, TRACES, VIOLATIONS
from gateway.store.search import prefix_condition

PREVIEW_CHARS = 300  # of the first user text; the page shows one line of it


def _column(name: str) -> Any:
    return TRACES.c.get(name)


def sorts() -> tuple[str, ...]:
    """Orders the list offers: newest first, then largest first by the others."""
    return ("time", "duration", "steps", "cost")


def narrow(
    query: sa.Select[Any],
    *,
    status: str | Sequence[str] | None = None,
    model: str | None = None,
    session: str | None = None,
    has_violations: bool | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> sa.Select[Any]:
    """The list's filters; a trace is in a time range when it was active during it."""
    t = TRACES.c
    if status:
        query = query.where(t.status.in_([status] if isinstance(status, str) else status))
    if model:
        # The trace's model list as JSON text: one table, no join; any case, any part.
        text = sa.func.lower(sa.cast(t.models, sa.Text))
        query = query.where(text.contains(model.lower(), autoescape=True))
    if session:
        column = _column("session_id")
        query = query.where(sa.false() if column is None else column == session)
    if has_violations is not None:
        query = query.where(t.violation_count > 0 if has_violations else t.violation_count == 0)
    if since is not None:
        query = query.where(t.updated_at >= since)
    if until is not None:
        query = query.where(t.started_at <= until)
    return query


def _sort_key(conn: Connection, sort: str) -> Any:
    if sort == "steps":
        return TRACES.c.step_count
    if sort == "cost":
        return TRACES.c.cost_nano
    if sort != "duration":
        raise ValueError(f"unknown sort: {sort}")
    t = TRACES.c
    end = sa.func.coalesce(t.last_response_end, t.updated_at)
    # Whole milliseconds: equal durations tie exactly (then ordered by id), whatever the
    # rounding of the day fractions or epochs they are computed from.
    if conn.dialect.name == "postgresql":
        seconds = sa.extract("epoch", end - t.started_at)
        return sa.cast(sa.func.round(seconds * 1000), sa.Float)
    days = sa.func.julianday(end) - sa.func.julianday(t.started_at)
    return sa.cast(sa.func.round(days * 86_400_000), sa.Float)


def sorted_page(
    conn: Connection, query: sa.Select[Any], sort: str, limit: int, cursor: str | None
) -> tuple[list[RowMapping], str | None]:
    """Keyset pagination, largest first by `sort` then by id: stable while rows arrive."""
    key = _sort_key(conn, sort).label("sort_key")
    query = query.add_columns(key)
    if cursor:
        value, row_id = _decode(cursor, sort)
        query = query.where(sa.or_(key < value, sa.and_(key == value, TRACES.c.id < row_id)))
    query = query.order_by(key.desc(), TRACES.c.id.desc()).limit(limit + 1)
    rows = list(conn.execute(query).mappings())
    if len(rows) <= limit:
        return rows, None
    last = rows[limit - 1]
    return rows[:limit], _encode(sort, last["sort_key"], last["id"])


def _encode(sort: str, value: Any, row_id: str) -> str:
    return cursor_codec.encode([sort, value, row_id])


def _decode(cursor: str, sort: str) -> tuple[float, str]:
    def read(values: list[Any]) -> tuple[float, str]:
        named, value, row_id = values
        if named != sort or not isinstance(value, int | float):
            raise ValueError
        return float(value), str(row_id)

    return cursor_codec.decode(cursor, read)


def trace_extras(engine: Engine, trace_ids: list[str]) -> dict[str, dict[str, Any]]:
    """Per listed trace: its last stop reason, violation kinds with counts, when its last
    refused request came and its last step started, and the start of its first user text."""
    extras: dict[str, dict[str, Any]] = {
        trace_id: {
            "last_stop_reason": None,
            "violation_kinds": {},
            "last_refusal_at": None,
            "last_step_at": None,
            "first_user_text": None,
        }
        for trace_id in trace_ids
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
        refusals = conn.execute(
            sa.select(v.trace_id, sa.func.max(v.created_at))
            .where(v.trace_id.in_(trace_ids), v.step_id.is_(None), v.enforced.is_(True))
            .group_by(v.trace_id)
        ).all()
        starts = conn.execute(
            sa.select(STEPS.c.trace_id, sa.func.max(STEPS.c.started_at))
            .where(STEPS.c.trace_id.in_(trace_ids))
            .group_by(STEPS.c.trace_id)
        ).all()
        firsts = _first_user_texts(conn, trace_ids)
    for trace_id, kind, count in counts:
        extras[trace_id]["violation_kinds"][kind] = count
    for trace_id, when in refusals:
        extras[trace_id]["last_refusal_at"] = when
    for trace_id, when in starts:
        extras[trace_id]["last_step_at"] = when
    for trace_id, text in firsts.items():
        extras[trace_id]["first_user_text"] = text
    return extras


def _first_user_texts(conn: Connection, trace_ids: list[str]) -> dict[str, str]:
    """The head of each trace's first user input item, from its first step."""
    i, s = ITEMS.c, STEPS.c
    rows = conn.execute(
        sa.select(s.trace_id, sa.func.substr(i.text, 1, PREVIEW_CHARS))
        .join(STEPS, s.id == i.step_id)
        .where(
            s.trace_id.in_(trace_ids),
            s.seq == 1,
            i.direction == "input",
            i.kind == "user",
            i.text.is_not(None),
        )
        .order_by(s.trace_id, i.position.desc())
    ).all()
    return {trace_id: text for trace_id, text in rows}  # the lowest position is written last


def find_prefix(engine: Engine, text: str) -> dict[str, Any] | None:
    """The newest trace (and step) whose id, step id, response id or provider request id
    starts with `text`, or that holds a tool call or result with exactly that call id."""
    t, s, i = TRACES.c, STEPS.c, ITEMS.c
    queries = [
        sa.select(t.id.label("trace_id"), sa.null().label("step_id"), t.updated_at.label("at"))
        .where(prefix_condition(t.id, text))
        .order_by(t.updated_at.desc())
        .limit(1),
        sa.select(s.trace_id, s.id.label("step_id"), s.started_at.label("at"))
        .where(
            sa.or_(
                prefix_condition(s.id, text),
                prefix_condition(s.response_id, text),
                prefix_condition(s.provider_request_id, text),
            )
        )
        .order_by(s.started_at.desc())
        .limit(1),
        sa.select(s.trace_id, s.id.label("step_id"), s.started_at.label("at"))
        .join(ITEMS, i.step_id == s.id)
        .where(i.call_id == text)
        .order_by(s.started_at)
        .limit(1),
    ]
    with engine.connect() as conn:
        for query in queries:
            row = conn.execute(query).mappings().first()
            if row is not None:
                return {"trace_id": row["trace_id"], "step_id": row["step_id"]}
    return None
