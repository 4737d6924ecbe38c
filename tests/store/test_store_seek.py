"""The lists seek: every page after a cursor is a range scan of the index that matches its
order (checked on the database's own query plan), `since`/`until` bound the last activity,
and the model filter reads the per-trace model table. SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from gateway.items import StopReason, Violation, ViolationKind
from gateway.step import RefusalRecord, StepRecord
from gateway.store.read import sessions as session_list
from gateway.store.read.queries import encode_cursor, list_traces, list_violations
from gateway.store.write import trace_models
from gateway.store.write.writer import StoreWriter
from tests.factories import T0, build_step

Read = Callable[..., dict[str, Any]]


def _ids(page: dict[str, Any]) -> list[str]:
    return [t["id"] for t in page["traces"]]


def _two_steps(trace_id: str, first: datetime, last: datetime, **fields: Any) -> list[StepRecord]:
    """A run whose first request came at `first` and whose last step started at `last`."""
    return [build_step(trace_id, at=first, **fields), build_step(trace_id, at=last, **fields)]


def test_since_and_until_bound_the_last_activity(engine: Engine) -> None:
    since, until = T0 + timedelta(hours=1), T0 + timedelta(hours=2)
    hour = timedelta(hours=1)
    StoreWriter(engine).write_batch(
        [
            *_two_steps("before", T0, T0 + timedelta(minutes=30)),
            *_two_steps("began-before-since", T0, since + timedelta(minutes=5)),
            *_two_steps("inside", since + timedelta(minutes=10), until - timedelta(minutes=10)),
            *_two_steps("active-after-until", since + timedelta(minutes=20), until + hour),
            *_two_steps("after", until + hour, until + 2 * hour),
        ]
    )
    window = list_traces(engine, since=since, until=until)
    assert _ids(window) == ["inside", "began-before-since"]
    # A run that started before `until` but was still active after it is not "until".
    assert "active-after-until" not in _ids(list_traces(engine, until=until))
    assert _ids(list_traces(engine, until=until)) == ["inside", "began-before-since", "before"]
    assert _ids(list_traces(engine, since=since)) == [
        "after",
        "active-after-until",
        "inside",
        "began-before-since",
    ]
    edge = datetime.fromisoformat(list_traces(engine, limit=1)["traces"][0]["updated_at"])
    assert _ids(list_traces(engine, since=edge, until=edge)) == ["after"]  # both inclusive
    later = encode_cursor(until + 3 * hour, "~")  # a cursor past `until` does not lift it
    assert _ids(list_traces(engine, until=until, cursor=later)) == _ids(
        list_traces(engine, until=until)
    )


@pytest.mark.parametrize("few", [trace_models.FEW, 1], ids=["few-read-by-id", "many-walked"])
def test_model_filter_reads_each_traces_models(
    engine: Engine, few: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(trace_models, "FEW", few)
    writer = StoreWriter(engine)
    writer.write_batch(
        [
            build_step("mixed", at=T0, model="gpt-4o-mini"),
            build_step("claude", at=T0 + timedelta(minutes=1), model="Claude-Sonnet-4"),
            build_step("none", at=T0 + timedelta(minutes=2), model=None),
            build_step("odd", at=T0 + timedelta(minutes=3), model="50%_off"),
        ]
    )
    # A later batch adds a model to a trace; one already listed is not listed twice.
    writer.write_batch(
        [
            build_step("mixed", at=T0 + timedelta(minutes=4), model="claude-haiku"),
            build_step("mixed", at=T0 + timedelta(minutes=5), model="gpt-4o-mini"),
        ]
    )
    with engine.connect() as conn:
        assert trace_models.model_names(conn) == sorted(
            ["gpt-4o-mini", "Claude-Sonnet-4", "50%_off", "claude-haiku"]
        )
        assert trace_models.matching(conn, "CLAUDE") == ["Claude-Sonnet-4", "claude-haiku"]
    assert _ids(list_traces(engine, model="claude")) == ["mixed", "claude"]
    assert _ids(list_traces(engine, model="4O-MINI")) == ["mixed"]
    assert _ids(list_traces(engine, model="%_")) == ["odd"]  # a wildcard is a character
    assert _ids(list_traces(engine, model="%")) == ["odd"]
    assert _ids(list_traces(engine, model="gemini")) == []
    assert list_traces(engine, model="claude", limit=1)["next_cursor"] is not None
    mixed = list_traces(engine, model="haiku")["traces"][0]
    assert mixed["models"] == ["gpt-4o-mini", "claude-haiku"]  # as the trace lists them


def test_pages_follow_each_order_with_ties(engine: Engine) -> None:
    """Equal keys (same time, steps, cost and length) order by id, pages never repeat."""
    at = T0
    records: list[StepRecord | RefusalRecord] = [
        build_step(f"tie-{n}", at=at, cost_nano=500, session_id="s") for n in range(7)
    ]
    StoreWriter(engine).write_batch(records)
    expected = [f"tie-{n}" for n in reversed(range(7))]
    for sort in ("time", "steps", "cost", "duration"):
        assert _every_page(engine, 2, sort=sort) == expected
    assert _every_page(engine, 3, session="s") == expected


def _every_page(engine: Engine, limit: int, **params: Any) -> list[str]:
    ids: list[str] = []
    cursor = None
    while True:
        page = list_traces(engine, limit=limit, cursor=cursor, **params)
        ids += _ids(page)
        cursor = page["next_cursor"]
        if cursor is None:
            return ids


# --- Query plans: each page after a cursor is an index range scan in the index's order.


@contextmanager
def _statements(engine: Engine) -> Iterator[list[tuple[str, Any]]]:
    """The SELECTs on `table` the block runs, with their parameters."""
    seen: list[tuple[str, Any]] = []

    def keep(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if statement.lstrip().upper().startswith(("SELECT", "WITH")):
            seen.append((statement, parameters))

    sa.event.listen(engine, "before_cursor_execute", keep)
    try:
        yield seen
    finally:
        sa.event.remove(engine, "before_cursor_execute", keep)


def _plan(engine: Engine, statement: str, parameters: Any) -> str:
    """The database's plan of a statement. PostgreSQL is told to avoid what a tiny test
    table makes cheapest (reading it whole, bitmaps, sorting), so the plan shows whether an
    index can deliver the order, as it must on a large store."""
    with engine.connect() as conn:
        if conn.dialect.name == "sqlite":
            rows = conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters).all()
            return "\n".join(str(row[-1]) for row in rows)
        for setting in ("enable_seqscan", "enable_bitmapscan", "enable_sort"):
            conn.exec_driver_sql(f"SET {setting} = off")
        rows = conn.exec_driver_sql("EXPLAIN " + statement, parameters).all()
        return "\n".join(str(row[0]) for row in rows)


def _plan_of(engine: Engine, read: Read, table: str, **params: Any) -> str:
    """The plan of the page after the first one (the one a cursor seeks)."""
    cursor = read(engine, limit=2, **params)["next_cursor"]
    assert cursor is not None
    with _statements(engine) as seen:
        read(engine, limit=2, cursor=cursor, **params)
    statement, parameters = next((s, p) for s, p in seen if f"FROM {table}" in s)
    return _plan(engine, statement, parameters)


def _seed_for_plans(engine: Engine) -> None:
    dup = [Violation(ViolationKind.DUPLICATE_CALL_ID, "twice", call_id="c")]
    StoreWriter(engine).write_batch(
        [
            build_step(
                f"p-{n}",
                at=T0 + timedelta(minutes=n),
                session_id=f"s{n % 3}",
                cost_nano=n,
                violations=dup,
                stop_reason=StopReason.ERROR if n % 2 else StopReason.TOOL_CALLS,
            )
            for n in range(9)
        ]
    )


SEEKS = [
    # (what is read, its parameters, the table, the index that must serve it)
    (list_traces, {}, "traces", "ix_traces_updated"),
    (list_traces, {"sort": "steps"}, "traces", "ix_traces_steps"),
    (list_traces, {"sort": "cost"}, "traces", "ix_traces_cost"),
    (list_traces, {"sort": "duration"}, "traces", "ix_traces_span"),
    (list_traces, {"status": "failed"}, "traces", "ix_traces_status_updated"),
    # A ceiling on the last activity (idle for abandoned, until) is the cursor's to carry.
    (list_traces, {"status": "abandoned"}, "traces", "ix_traces_status_updated"),
    (list_traces, {"until": T0 + timedelta(days=1)}, "traces", "ix_traces_updated"),
    (list_traces, {"session": "s1"}, "traces", "ix_traces_session_updated"),
    (session_list.sessions_page, {}, "sessions", "ix_sessions_activity"),
    (list_violations, {}, "violations", "ix_violations_created"),
    (list_violations, {"kind": "duplicate_call_id"}, "violations", "ix_violations_kind_created"),
]


@pytest.mark.parametrize(("read", "params", "table", "index"), SEEKS)
def test_the_page_after_a_cursor_seeks_its_index(
    engine: Engine, read: Read, params: dict[str, Any], table: str, index: str
) -> None:
    _seed_for_plans(engine)
    plan = _plan_of(engine, read, table, **params)
    if engine.dialect.name == "sqlite":
        assert f"SEARCH {table} USING INDEX {index} (" in plan, plan
        assert ",id)<(?,?)" in plan or ",session_id)<(?,?)" in plan, plan  # the row value
        assert "TEMP B-TREE" not in plan, plan  # read in the index's order, no sort
    else:
        assert f"Index Scan Backward using {index} on {table}" in plan, plan
        assert "Index Cond:" in plan and "ROW(" in plan, plan  # the row value seeks
        assert "Sort" not in plan, plan


def test_a_time_range_seeks_the_last_activity_index(engine: Engine) -> None:
    _seed_for_plans(engine)
    since, until = T0 + timedelta(minutes=2), T0 + timedelta(minutes=6)
    with _statements(engine) as seen:
        assert len(list_traces(engine, since=since, until=until)["traces"]) == 4
    plan = _plan(engine, *next((s, p) for s, p in seen if "FROM traces" in s))
    if engine.dialect.name == "sqlite":
        assert "SEARCH traces USING INDEX ix_traces_updated (updated_at>? AND updated_at<?)" in plan
    else:
        assert "Index Scan Backward using ix_traces_updated on traces" in plan, plan
        assert "updated_at >=" in plan and "updated_at <=" in plan, plan


@pytest.mark.parametrize("few", [trace_models.FEW, 1], ids=["few-read-by-id", "many-walked"])
def test_the_model_filter_seeks_the_model_table(
    engine: Engine, few: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(trace_models, "FEW", few)
    _seed_for_plans(engine)
    with _statements(engine) as seen:
        assert len(list_traces(engine, model="gpt")["traces"]) == 9
    names, count, listing = (s for s in seen if "trace_models" in s[0])
    assert "RECURSIVE" in names[0]  # the few names, a seek each
    assert "count(" in count[0].lower()  # how many traces they have, up to FEW
    plan = _plan(engine, *listing)
    if engine.dialect.name == "sqlite" and few > 1:  # the traces of the model, by id
        assert "SEARCH trace_models USING COVERING INDEX ix_trace_models_model" in plan, plan
        assert "SEARCH traces USING INDEX sqlite_autoindex_traces_1 (id=?)" in plan, plan
    elif engine.dialect.name == "sqlite":  # newest first, each trace's (trace, model) key
        assert "SCAN traces USING INDEX ix_traces_updated" in plan, plan
        assert "SEARCH trace_models USING COVERING INDEX sqlite_autoindex" in plan, plan
    else:  # from either side: by model name, or each listed trace's (trace, model) key
        assert "using ix_trace_models_model on trace_models" in plan or "pkey" in plan, plan
        assert "Seq Scan" not in plan, plan
    assert "json" not in listing[0].lower()  # no trace's model list is read as text
