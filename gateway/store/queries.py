"""Read side of the store: plain dicts in the read API's JSON shape (DESIGN.md, Read API)."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine, RowMapping

from gateway.items import Item, ItemKind
from gateway.store import listing
from gateway.store.models import ITEMS, STEPS, TRACES, VIOLATIONS

DEFAULT_LIMIT = 50
MAX_LIMIT = 200
USAGE_FIELDS = (
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "cached_tokens",
    "reasoning_tokens",
)
_ITEM_FIELDS = ("kind", "role", "text", "call_id", "tool_name", "arguments", "is_error", "attrs")


def iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


@contextmanager
def _reading(engine: Engine) -> Iterator[Connection]:
    """One snapshot for the whole read, so a trace and its steps agree with each other."""
    with engine.connect() as conn:
        if conn.dialect.name == "postgresql":
            conn.execution_options(isolation_level="REPEATABLE READ")
        with conn.begin():
            yield conn


def encode_cursor(when: datetime, row_id: str) -> str:
    raw = json.dumps([iso(when), row_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        when, row_id = json.loads(raw)
        return datetime.fromisoformat(when), str(row_id)
    except (binascii.Error, ValueError, TypeError):
        # ValueError: the read API answers it with a 400 naming the cursor.
        raise ValueError("invalid cursor") from None


def _page(
    conn: Connection,
    query: sa.Select[Any],
    columns: tuple[Any, Any],
    limit: int,
    cursor: str | None,
) -> tuple[list[RowMapping], str | None]:
    """Keyset pagination, newest first by (time, id): stable while rows keep arriving."""
    when_col, id_col = columns
    limit = max(1, min(limit, MAX_LIMIT))
    if cursor:
        when, row_id = decode_cursor(cursor)
        query = query.where(sa.or_(when_col < when, sa.and_(when_col == when, id_col < row_id)))
    query = query.order_by(when_col.desc(), id_col.desc()).limit(limit + 1)
    rows = list(conn.execute(query).mappings())
    if len(rows) <= limit:
        return rows, None
    last = rows[limit - 1]
    return rows[:limit], encode_cursor(last[when_col.name], last[id_col.name])


def trace_json(row: RowMapping) -> dict[str, Any]:
    return {
        "id": row["id"],
        "started_at": iso(row["started_at"]),
        "updated_at": iso(row["updated_at"]),
        "status": row["status"],
        "step_count": row["step_count"],
        "models": list(row["models"] or []),
        "usage": {name: row[name] for name in USAGE_FIELDS},
        "violation_count": row["violation_count"],
        "budget": {"max_steps": row["budget_max_steps"], "max_tokens": row["budget_max_tokens"]},
    }


def violation_json(row: RowMapping) -> dict[str, Any]:
    return {
        "id": row["id"],
        "kind": row["kind"],
        "trace_id": row["trace_id"],
        "step_id": row["step_id"],
        "call_id": row["call_id"],
        "detail": row["detail"],
        "enforced": row["enforced"],
        "created_at": iso(row["created_at"]),
    }


def list_traces(
    engine: Engine,
    *,
    limit: int = DEFAULT_LIMIT,
    cursor: str | None = None,
    status: str | Sequence[str] | None = None,
    model: str | None = None,
    violation: str | None = None,
    session: str | None = None,
    has_violations: bool | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    sort: str = "time",
) -> dict[str, Any]:
    """A page of traces, newest first or largest first by `sort` (listing.sorts())."""
    t = TRACES.c
    query = listing.narrow(
        sa.select(TRACES),
        status=status,
        model=model,
        session=session,
        has_violations=has_violations,
        since=since,
        until=until,
    )
    if violation:
        query = query.where(
            sa.exists().where(VIOLATIONS.c.trace_id == t.id, VIOLATIONS.c.kind == violation)
        )
    with _reading(engine) as conn:
        if sort == "time":
            rows, next_cursor = _page(conn, query, (t.updated_at, t.id), limit, cursor)
        else:
            limit = max(1, min(limit, MAX_LIMIT))
            rows, next_cursor = listing.sorted_page(conn, query, sort, limit, cursor)
    return {"traces": [trace_json(row) for row in rows], "next_cursor": next_cursor}


def get_trace_summary(engine: Engine, trace_id: str) -> dict[str, Any] | None:
    """The trace as listed, without its steps: cheap for counters and headers."""
    with _reading(engine) as conn:
        row = conn.execute(sa.select(TRACES).where(TRACES.c.id == trace_id)).mappings().first()
    return None if row is None else trace_json(row)


def get_trace(engine: Engine, trace_id: str) -> dict[str, Any] | None:
    with _reading(engine) as conn:
        row = conn.execute(sa.select(TRACES).where(TRACES.c.id == trace_id)).mappings().first()
        if row is None:
            return None
        steps = conn.execute(
            sa.select(STEPS).where(STEPS.c.trace_id == trace_id).order_by(STEPS.c.seq)
        ).mappings()
        items = conn.execute(
            sa.select(ITEMS)
            .join(STEPS, STEPS.c.id == ITEMS.c.step_id)
            .where(STEPS.c.trace_id == trace_id)
            .order_by(ITEMS.c.step_id, ITEMS.c.direction, ITEMS.c.position)
        ).mappings()
        violations = conn.execute(
            sa.select(VIOLATIONS)
            .where(VIOLATIONS.c.trace_id == trace_id)
            .order_by(VIOLATIONS.c.created_at, VIOLATIONS.c.id)
        ).mappings()
        step_dicts = [step_json(step) for step in steps]
        by_step = {step["id"]: step for step in step_dicts}
        for item in items:
            by_step[item["step_id"]][item["direction"] + "_items"].append(item_json(item))
        result = trace_json(row)
        result["steps"] = step_dicts
        result["violations"] = [violation_json(v) for v in violations]
    return result


def step_json(row: RowMapping) -> dict[str, Any]:
    return {
        "id": row["id"],
        "seq": row["seq"],
        "protocol": row["protocol"],
        "model": row["model"],
        "stream": row["stream"],
        "http_status": row["http_status"],
        "stop_reason": row["stop_reason"],
        "raw_stop_reason": row["raw_stop_reason"],
        "usage": {name: row[name] for name in USAGE_FIELDS},
        "provider_request_id": row["provider_request_id"],
        "response_id": row["response_id"],
        "started_at": iso(row["started_at"]),
        "latency_ms": row["latency_ms"],
        "ttft_ms": row["ttft_ms"],
        "input_items": [],
        "output_items": [],
        "error": row["error"],
    }


def item_json(row: RowMapping) -> dict[str, Any]:
    return {name: row[name] for name in _ITEM_FIELDS}


def find_continuation(engine: Engine, keys: list[str]) -> tuple[str, str, str] | None:
    """The (trace_id, step_id, key) of the latest-listed key that matches a recorded step.

    Callers list keys by increasing prefix length, so the last match is the longest history
    the request continues; among steps sharing that key the most recent wins.
    """
    if not keys:
        return None
    rank = {key: index for index, key in enumerate(keys)}
    s = STEPS.c
    query = sa.select(s.trace_id, s.id, s.continuation_key, s.started_at).where(
        s.continuation_key.in_(list(rank))
    )
    with _reading(engine) as conn:
        rows = conn.execute(query).all()
    if not rows:
        return None
    best = max(rows, key=lambda r: (rank[r.continuation_key], r.started_at, r.id))
    return best.trace_id, best.id, best.continuation_key


def call_emitters(engine: Engine, call_ids: list[str]) -> list[tuple[str, str, str]]:
    """(call_id, trace_id, step_id) for every recorded step that emitted one of `call_ids`."""
    if not call_ids:
        return []
    i, s = ITEMS.c, STEPS.c
    query = (
        sa.select(i.call_id, s.trace_id, s.id)
        .join(STEPS, s.id == i.step_id)
        .where(i.call_id.in_(call_ids), i.direction == "output", i.kind == "tool_call")
    )
    with _reading(engine) as conn:
        return [(row.call_id, row.trace_id, row.id) for row in conn.execute(query)]


def emitted_call_ids(engine: Engine, batch: int = 10_000) -> Iterator[str]:
    """Every tool call id a recorded step emitted, in index order, in bounded batches."""
    i = ITEMS.c
    after = ""
    while True:
        query = (
            sa.select(i.call_id)
            .where(i.call_id > after, i.direction == "output", i.kind == "tool_call")
            .order_by(i.call_id)
            .limit(batch)
        )
        with _reading(engine) as conn:
            ids = list(conn.scalars(query))
        yield from ids
        if len(ids) < batch:
            return
        after = ids[-1]


def continuation_keys(engine: Engine, batch: int = 10_000) -> Iterator[str]:
    """Every stored continuation key, in index order, read in bounded batches."""
    s = STEPS.c
    after = ""
    while True:
        query = (
            sa.select(s.continuation_key)
            .where(s.continuation_key > after)
            .order_by(s.continuation_key)
            .limit(batch)
        )
        with _reading(engine) as conn:
            keys = list(conn.scalars(query))
        yield from keys
        if len(keys) < batch:
            return
        after = keys[-1]


def list_violations(
    engine: Engine,
    *,
    limit: int = DEFAULT_LIMIT,
    cursor: str | None = None,
    kind: str | None = None,
) -> dict[str, Any]:
    v = VIOLATIONS.c
    query = sa.select(VIOLATIONS)
    if kind:
        query = query.where(v.kind == kind)
    with _reading(engine) as conn:
        rows, next_cursor = _page(conn, query, (v.created_at, v.id), limit, cursor)
    return {"violations": [violation_json(row) for row in rows], "next_cursor": next_cursor}


def find_step(engine: Engine, query: str) -> dict[str, Any] | None:
    """Where a step id, response id or provider request id was recorded, or None."""
    s = STEPS.c
    statement = (
        sa.select(s.trace_id, s.id, s.seq)
        .where(sa.or_(s.id == query, s.response_id == query, s.provider_request_id == query))
        .order_by(s.started_at.desc())
        .limit(1)
    )
    with _reading(engine) as conn:
        row = conn.execute(statement).first()
    return None if row is None else {"trace_id": row.trace_id, "step_id": row.id, "seq": row.seq}


def find_by_response_id(engine: Engine, response_id: str) -> tuple[str, str] | None:
    """The (trace_id, step_id) that returned a Responses API id: `previous_response_id`."""
    s = STEPS.c
    statement = (
        sa.select(s.trace_id, s.id)
        .where(s.response_id == response_id)
        .order_by(s.started_at.desc())
        .limit(1)
    )
    with _reading(engine) as conn:
        row = conn.execute(statement).first()
    return None if row is None else (row.trace_id, row.id)


def step_output_items(engine: Engine, step_id: str) -> list[Item]:
    """A step's output as typed items, to compare with the history a request echoes."""
    i = ITEMS.c
    statement = (
        sa.select(ITEMS).where(i.step_id == step_id, i.direction == "output").order_by(i.position)
    )
    with _reading(engine) as conn:
        rows = conn.execute(statement).mappings().all()
    return [
        Item(
            kind=ItemKind(row["kind"]),
            **{name: row[name] for name in _ITEM_FIELDS if name != "kind"},
        )
        for row in rows
    ]


def last_step(engine: Engine, trace_id: str) -> tuple[str, list[Item]] | None:
    """The newest step of a trace and its output, for checks against what it emitted."""
    s = STEPS.c
    statement = sa.select(s.id).where(s.trace_id == trace_id).order_by(s.seq.desc()).limit(1)
    with _reading(engine) as conn:
        step_id = conn.execute(statement).scalar()
    if step_id is None:
        return None
    return step_id, step_output_items(engine, step_id)
