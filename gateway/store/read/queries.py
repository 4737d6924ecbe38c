"""Read side of the store: plain dicts in the read API's JSON shape (DESIGN.md, Read API)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine, RowMapping

from gateway.items import Item, ItemKind
from gateway.runs.status import DEFAULT_IDLE_SECONDS
from gateway.store.key_epochs import stored_epochs
from gateway.store.mcp_tables import MCP_VIOLATIONS
from gateway.store.models import ITEMS, STEPS, TRACES, VIOLATIONS
from gateway.store.partitions import ranges as partitions
from gateway.store.read import cursor as cursor_codec
from gateway.store.read import keyset, replays, search, trees
from gateway.store.read.deadline import time_limit
from gateway.store.read.filters import TraceFilters, trace_conditions
from gateway.store.read.shapes import (
    ITEM_FIELDS,
    iso,
    item_json,
    mcp_violation_json,
    refusal_json,
    step_json,
    trace_json,
    violation_json,
    without_opaque,
)
from gateway.store.write import trace_models
from gateway.store.write.tool_sets import read_tool_sets

DEFAULT_LIMIT = 50
MAX_LIMIT = 200
SEARCH_TIMEOUT_S = 2.0  # the longest a list read with `q` may run


@contextmanager
def reading(engine: Engine) -> Iterator[Connection]:
    """One snapshot for the whole read, so a trace and its steps agree with each other."""
    with engine.connect() as conn:
        if conn.dialect.name == "postgresql":
            conn.execution_options(isolation_level="REPEATABLE READ")
        with conn.begin():
            yield conn


def encode_cursor(when: datetime, row_id: str) -> str:
    return cursor_codec.encode([iso(when), row_id])


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    def read(values: list[Any]) -> tuple[datetime, str]:
        when, row_id = values
        return datetime.fromisoformat(when), str(row_id)

    return cursor_codec.decode(cursor, read)


def page(
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
        query = query.where(keyset.before(columns, decode_cursor(cursor)))
    query = query.order_by(when_col.desc(), id_col.desc()).limit(limit + 1)
    rows = list(conn.execute(query).mappings())
    if len(rows) <= limit:
        return rows, None
    last = rows[limit - 1]
    return rows[:limit], encode_cursor(last[when_col.name], last[id_col.name])


def list_traces(
    engine: Engine,
    *,
    limit: int = DEFAULT_LIMIT,
    cursor: str | None = None,
    status: str | None = None,
    model: str | None = None,
    violation: str | None = None,
    session: str | None = None,
    has_violations: bool | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    q: str | None = None,
    include_children: bool | None = None,
    sort: str = "time",
    filters: TraceFilters | None = None,
    now: datetime | None = None,
    idle_seconds: float = DEFAULT_IDLE_SECONDS,
    search_timeout: float = SEARCH_TIMEOUT_S,
) -> dict[str, Any]:
    """One page, newest first, or largest first by `sort` (listing.sorts()). `filters`
    carries the read API's filters (DESIGN.md); the keyword ones are merged into it. With
    `q`, the read stops after `search_timeout` seconds (deadline.ReadTimedOut)."""
    now = now or datetime.now(UTC)
    t = TRACES.c
    filters = (filters or TraceFilters()).merged(
        status=status,
        model=model,
        violation=violation,
        session=session,
        has_violations=has_violations,
        since=since,
        until=until,
        q=q,
        include_children=include_children,
    )
    with reading(engine) as conn, _limited(conn, filters.q, search_timeout):
        models = trace_models.filter_on(conn, filters.model) if filters.model else None
        below = decode_cursor(cursor)[0] if cursor and sort == "time" else None
        conditions = trace_conditions(
            filters, engine.dialect.name, now, idle_seconds, models, below
        )
        query = sa.select(TRACES).where(*conditions)
        if filters.q:  # find, then fetch: the page reads only the traces found
            query = query.where(t.id.in_(sorted(search.matching_trace_ids(conn, filters.q))))
        rows, next_cursor = _sorted_page(conn, query, sort, limit, cursor)
        totals = trees.tree_totals(conn, [trees.root_of(row) for row in rows])
    traces = [trace_json(row, now, idle_seconds) | _in_tree(row, totals) for row in rows]
    return {"traces": traces, "next_cursor": next_cursor}


def _in_tree(row: RowMapping, totals: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A listed trace's place: its parent and root, and its tree's totals."""
    root = trees.root_of(row)
    return {
        "parent_trace_id": row["parent_trace_id"],
        "root_trace_id": root,
        "depth": row["depth"],
        "tree": totals.get(root, trees.EMPTY),
    }


def _limited(conn: Connection, q: str | None, seconds: float) -> AbstractContextManager[None]:
    return time_limit(conn, seconds) if q else nullcontext()


def _sorted_page(
    conn: Connection, query: sa.Select[Any], sort: str, limit: int, cursor: str | None
) -> tuple[list[RowMapping], str | None]:
    from gateway.store.read import listing  # listing builds on this module's reading helpers

    if sort == "time":
        return page(conn, query, (TRACES.c.updated_at, TRACES.c.id), limit, cursor)
    return listing.sorted_page(conn, query, sort, max(1, min(limit, MAX_LIMIT)), cursor)


def get_trace_summary(
    engine: Engine,
    trace_id: str,
    now: datetime | None = None,
    idle_seconds: float = DEFAULT_IDLE_SECONDS,
) -> dict[str, Any] | None:
    """The trace as listed, without its steps: cheap for counters and headers."""
    with reading(engine) as conn:
        row = conn.execute(sa.select(TRACES).where(TRACES.c.id == trace_id)).mappings().first()
    return None if row is None else trace_json(row, now, idle_seconds)


def get_trace(
    engine: Engine,
    trace_id: str,
    now: datetime | None = None,
    idle_seconds: float = DEFAULT_IDLE_SECONDS,
    *,
    steps_after: int = 0,
    steps_limit: int | None = None,
    opaque: bool = False,
) -> dict[str, Any] | None:
    """The trace with its violations, refusals and steps: those numbered after `steps_after`,
    at most `steps_limit` of them (None: all). `next_steps_after` is the last step number
    given when more steps follow, else None. `opaque`: with kept payloads (cassettes, forks)."""
    with reading(engine) as conn:
        row = conn.execute(sa.select(TRACES).where(TRACES.c.id == trace_id)).mappings().first()
        if row is None:
            return None
        placed = _partition_of(conn, row)
        steps, more = _steps(conn, trace_id, steps_after, steps_limit, placed)
        violations = conn.execute(
            sa.select(VIOLATIONS)
            .where(VIOLATIONS.c.trace_id == trace_id, *_in_partition(VIOLATIONS, placed))
            .order_by(VIOLATIONS.c.created_at, VIOLATIONS.c.id)
        ).mappings()
        result = trace_json(row, now, idle_seconds) | trees.place_json(conn, row, now, idle_seconds)
        result["steps"] = steps if opaque else without_opaque(steps)
        result |= replays.made_from_json(conn, trace_id, now, idle_seconds)
        result["next_steps_after"] = steps[-1]["seq"] if more else None
        stored = list(violations)
        result["violations"] = [violation_json(v) for v in stored]
        result["refusals"] = [
            refusal_json(v) for v in stored if v["step_id"] is None and v["enforced"]
        ]
    return result


def _partition_of(conn: Connection, trace: Any) -> datetime | None:
    """On a partitioned store the trace's partition key: its rows' reads then look in its
    one time partition instead of in each. None on an unpartitioned store (old rows there
    have no placement)."""
    return trace["placed_at"] if partitions.partitioned(conn.engine) else None


def _in_partition(table: sa.Table, placed: datetime | None) -> list[sa.ColumnElement[bool]]:
    return [] if placed is None else [table.c.placed_at == placed]


def _steps(
    conn: Connection, trace_id: str, after: int, limit: int | None, placed: datetime | None
) -> tuple[list[dict[str, Any]], bool]:
    """A page of the trace's steps in order, with their items and tools; and whether more
    steps follow it. Read by the (trace_id, seq) index and the items' step index."""
    s, i = STEPS.c, ITEMS.c
    query = sa.select(STEPS).where(
        s.trace_id == trace_id, s.seq > after, *_in_partition(STEPS, placed)
    )
    query = query.order_by(s.seq)
    if limit is not None:
        query = query.limit(limit + 1)
    steps = [step_json(step) for step in conn.execute(query).mappings()]
    more = limit is not None and len(steps) > limit
    steps = steps[:limit] if more else steps
    if limit is None:  # the rest of the trace: one join, whatever its length
        items = sa.select(ITEMS).join(STEPS, s.id == i.step_id)
        items = items.where(s.trace_id == trace_id, s.seq > after, *_in_partition(STEPS, placed))
    else:
        items = sa.select(ITEMS).where(i.step_id.in_([step["id"] for step in steps]))
    items = items.where(*_in_partition(ITEMS, placed))
    rows = conn.execute(items.order_by(i.step_id, i.direction, i.position)).mappings()
    by_step = {step["id"]: step for step in steps}
    for item in rows:
        by_step[item["step_id"]][item["direction"] + "_items"].append(item_json(item))
    tool_sets = read_tool_sets(conn, (step["tool_set"] for step in steps))
    for step in steps:
        step["tools"] = tool_sets.get(step["tool_set"] or "")
    return steps, more


def find_continuation(engine: Engine, keys: list[str]) -> tuple[str, str, str] | None:
    """The (trace_id, step_id, key) of the latest-listed key that matches a recorded step.

    Callers list keys by increasing prefix length, so the last match is the longest history
    the request continues; among steps sharing that key the most recent wins.
    """
    if not keys:
        return None
    rank = {key: index for index, key in enumerate(keys)}
    s = STEPS.c
    with reading(engine) as conn:
        query = sa.select(s.trace_id, s.id, s.continuation_key, s.started_at).where(
            s.key_epoch.in_(stored_epochs(conn)), s.continuation_key.in_(list(rank))
        )
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
    with reading(engine) as conn:
        query = (
            sa.select(i.call_id, s.trace_id, s.id)
            .join(STEPS, s.id == i.step_id)
            .where(
                i.key_epoch.in_(stored_epochs(conn)),
                i.call_id.in_(call_ids),
                i.direction == "output",
                i.kind == "tool_call",
            )
        )
        return [(row.call_id, row.trace_id, row.id) for row in conn.execute(query)]


def stored_step_count(engine: Engine) -> int:
    """Steps stored, from the traces' counters: a tenth of the rows counting steps reads."""
    with reading(engine) as conn:
        total = conn.scalar(sa.select(sa.func.sum(TRACES.c.step_count)))
    return int(total or 0)


def list_violations(
    engine: Engine,
    *,
    limit: int = DEFAULT_LIMIT,
    cursor: str | None = None,
    kind: str | None = None,
    trace_id: str | None = None,
) -> dict[str, Any]:
    """Both sides' violations (`source`), newest first; of one kind, of one run, or both."""
    v, m = VIOLATIONS.c, MCP_VIOLATIONS.c
    given = {c: x for c, x in {"kind": kind, "trace_id": trace_id}.items() if x}  # both indexed
    query = sa.select(VIOLATIONS).where(*(v[c] == x for c, x in given.items()))
    mcp_query = sa.select(MCP_VIOLATIONS).where(*(m[c] == x for c, x in given.items()))
    with reading(engine) as conn:
        rows, more = page(conn, query, (v.created_at, v.id), limit, cursor)
        mcp_rows, mcp_more = page(conn, mcp_query, (m.created_at, m.id), limit, cursor)
    found = [(row["created_at"], row["id"], violation_json(row)) for row in rows]
    found += [(row["created_at"], row["id"], mcp_violation_json(row)) for row in mcp_rows]
    found.sort(key=lambda f: (_naive(f[0]), f[1]), reverse=True)
    limit = max(1, min(limit, MAX_LIMIT))
    more_left = more is not None or mcp_more is not None or len(found) > limit
    kept = found[:limit]
    next_cursor = encode_cursor(kept[-1][0], kept[-1][1]) if more_left and kept else None
    return {"violations": [f[2] for f in kept], "next_cursor": next_cursor}


def _naive(when: datetime) -> datetime:
    return when if when.tzinfo is None else when.astimezone(UTC).replace(tzinfo=None)


def find_step(engine: Engine, query: str) -> dict[str, Any] | None:
    """Where a step id, response id or provider request id was recorded, or None."""
    s = STEPS.c
    with reading(engine) as conn:
        epochs = s.key_epoch.in_(stored_epochs(conn))
        # Flat OR branches, each with its index's whole condition: SQLite seeks each apart.
        answered = [sa.and_(epochs, c == query) for c in (s.response_id, s.provider_request_id)]
        statement = (
            sa.select(s.trace_id, s.id, s.seq)
            .where(sa.or_(s.id == query, *answered))
            .order_by(s.started_at.desc())
            .limit(1)
        )
        row = conn.execute(statement).first()
    return None if row is None else {"trace_id": row.trace_id, "step_id": row.id, "seq": row.seq}


def find_by_response_id(engine: Engine, response_id: str) -> tuple[str, str] | None:
    """The (trace_id, step_id) that returned a Responses API id: `previous_response_id`."""
    return _newest_step_where(engine, STEPS.c.response_id, response_id)


def find_by_conversation(engine: Engine, conversation_id: str) -> tuple[str, str] | None:
    """The (trace_id, step_id) of the newest step of a provider-side conversation."""
    return _newest_step_where(engine, STEPS.c.conversation_id, conversation_id)


def find_by_held_state(engine: Engine, held_state: str) -> tuple[str, str] | None:
    """The (trace_id, step_id) whose output held this provider-held history (a compaction)."""
    return _newest_step_where(engine, STEPS.c.held_state, held_state)


def _newest_step_where(
    engine: Engine, column: sa.Column[Any], value: str
) -> tuple[str, str] | None:
    """The (trace_id, step_id) of the newest stored step whose indexed `column` is `value`."""
    s = STEPS.c
    with reading(engine) as conn:
        statement = (
            sa.select(s.trace_id, s.id)
            .where(s.key_epoch.in_(stored_epochs(conn)), column == value)
            .order_by(s.started_at.desc())
            .limit(1)
        )
        row = conn.execute(statement).first()
    return None if row is None else (row.trace_id, row.id)


def step_output_items(engine: Engine, step_id: str) -> list[Item]:
    """A step's output as typed items, to compare with the history a request echoes."""
    i = ITEMS.c
    statement = (
        sa.select(ITEMS).where(i.step_id == step_id, i.direction == "output").order_by(i.position)
    )
    with reading(engine) as conn:
        rows = conn.execute(statement).mappings().all()
    return [
        Item(
            kind=ItemKind(row["kind"]),
            **{name: row[name] for name in ITEM_FIELDS if name != "kind"},
        )
        for row in rows
    ]


def last_step(engine: Engine, trace_id: str) -> tuple[str, list[Item]] | None:
    """The newest step of a trace and its output, for checks against what it emitted."""
    s = STEPS.c
    statement = sa.select(s.id).where(s.trace_id == trace_id).order_by(s.seq.desc()).limit(1)
    with reading(engine) as conn:
        step_id = conn.execute(statement).scalar()
    if step_id is None:
        return None
    return step_id, step_output_items(engine, step_id)
