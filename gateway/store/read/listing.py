"""The traces list's sort orders and per-row extras (first user text, refusals)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine, RowMapping

from gateway.store.key_epochs import stored_epochs
from gateway.store.mcp_tables import MCP_VIOLATIONS
from gateway.store.models import ITEMS, STEPS, TRACES, VIOLATIONS
from gateway.store.read import cursor as cursor_codec
from gateway.store.read import keyset
from gateway.store.read.search import prefix_condition

PREVIEW_CHARS = 300  # of the first user text; the page shows one line of it


def sorts() -> tuple[str, ...]:
    """Orders the list offers: newest first, then largest first by the others."""
    return ("time", "duration", "steps", "cost")


# Each order's key column; an index on (key, id) serves each (gateway.store.models).
_SORT_KEYS = {"steps": "step_count", "cost": "cost_nano", "duration": "span_ms"}


def _sort_key(sort: str) -> Any:
    if sort not in _SORT_KEYS:
        raise ValueError(f"unknown sort: {sort}")
    return TRACES.c[_SORT_KEYS[sort]]


def sorted_page(
    conn: Connection, query: sa.Select[Any], sort: str, limit: int, cursor: str | None
) -> tuple[list[RowMapping], str | None]:
    """Keyset pagination, largest first by `sort` then by id: stable while rows arrive."""
    key = _sort_key(sort)
    if cursor:
        query = query.where(keyset.before((key, TRACES.c.id), _decode(cursor, sort)))
    query = query.order_by(key.desc(), TRACES.c.id.desc()).limit(limit + 1)
    rows = list(conn.execute(query).mappings())
    if len(rows) <= limit:
        return rows, None
    last = rows[limit - 1]
    return rows[:limit], _encode(sort, last[key.name], last["id"])


def _encode(sort: str, value: Any, row_id: str) -> str:
    return cursor_codec.encode([sort, value, row_id])


def _decode(cursor: str, sort: str) -> tuple[int | float, str]:
    def read(values: list[Any]) -> tuple[int | float, str]:
        named, value, row_id = values
        if named != sort or isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError
        # Bound as the key column's type: counts and nano-dollars are whole numbers.
        return (float(value) if sort == "duration" else int(value)), str(row_id)

    return cursor_codec.decode(cursor, read)


def trace_extras(engine: Engine, trace_ids: list[str]) -> dict[str, dict[str, Any]]:
    """Per listed trace: its last stop reason, violation kinds with counts (the MCP side's
    too, as its `violation_count` has them), when its last refused request came and its last
    step started, and the start of its first user text."""
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
        counts = [
            *_kind_counts(conn, VIOLATIONS, trace_ids),
            *_kind_counts(conn, MCP_VIOLATIONS, trace_ids),
        ]
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
    for trace_id, kind, count in sorted(counts, key=lambda row: row[1]):
        kinds = extras[trace_id]["violation_kinds"]
        kinds[kind] = kinds.get(kind, 0) + count
    for trace_id, when in refusals:
        extras[trace_id]["last_refusal_at"] = when
    for trace_id, when in starts:
        extras[trace_id]["last_step_at"] = when
    for trace_id, text in firsts.items():
        extras[trace_id]["first_user_text"] = text
    return extras


def _kind_counts(conn: Connection, table: sa.Table, trace_ids: list[str]) -> list[Any]:
    """(trace id, kind, count) of one side's violations of these traces."""
    c = table.c
    return list(
        conn.execute(
            sa.select(c.trace_id, c.kind, sa.func.count())
            .where(c.trace_id.in_(trace_ids))
            .group_by(c.trace_id, c.kind)
        ).all()
    )


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
    with engine.connect() as conn:
        known = stored_epochs(conn)
        epochs = s.key_epoch.in_(known)
        # Flat OR branches, each with its index's whole condition: SQLite seeks each apart.
        answered = [
            sa.and_(epochs, prefix_condition(column, text))
            for column in (s.response_id, s.provider_request_id)
        ]
        queries = [
            sa.select(t.id.label("trace_id"), sa.null().label("step_id"), t.updated_at.label("at"))
            .where(prefix_condition(t.id, text))
            .order_by(t.updated_at.desc())
            .limit(1),
            sa.select(s.trace_id, s.id.label("step_id"), s.started_at.label("at"))
            .where(sa.or_(prefix_condition(s.id, text), *answered))
            .order_by(s.started_at.desc())
            .limit(1),
            sa.select(s.trace_id, s.id.label("step_id"), s.started_at.label("at"))
            .join(ITEMS, i.step_id == s.id)
            .where(i.key_epoch.in_(known), i.call_id == text)
            .order_by(s.started_at)
            .limit(1),
        ]
        for query in queries:
            row = conn.execute(query).mappings().first()
            if row is not None:
                return {"trace_id": row["trace_id"], "step_id": row["step_id"]}
    return None
