"""The sessions summary the writer keeps is what grouping the traces gives, whatever the
order of writes, under two replicas writing at once, and after retention took traces out;
the sessions list pages through it by cursor. SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from gateway.items import Violation, ViolationKind
from gateway.step import RefusalRecord
from gateway.store.engine import create_schema, make_engine
from gateway.store.models import SESSIONS, TRACES
from gateway.store.read.sessions import session_summaries, sessions_page
from gateway.store.retention.sweep import purge_batch
from gateway.store.write.writer import StoreWriter, merge_mcp_activity
from tests.conftest import Database
from tests.factories import T0, build_step

DUP = Violation(ViolationKind.DUPLICATE_CALL_ID, "twice", call_id="c")


def _utc(value: Any) -> datetime:
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def grouped(engine: Engine) -> dict[str, tuple[Any, ...]]:
    """Each session as grouping its traces says it is (what the list computed before)."""
    t = TRACES.c
    query = (
        sa.select(
            t.session_id,
            sa.func.count(),
            sa.func.sum(t.step_count),
            sa.func.sum(t.total_tokens),
            sa.func.sum(t.violation_count),
            sa.func.sum(t.cost_nano),
            sa.func.min(t.started_at),
            sa.func.max(t.updated_at),
        )
        .where(t.session_id.is_not(None))
        .group_by(t.session_id)
    )
    with engine.connect() as conn:
        return {
            row[0]: (*(int(v) for v in row[1:6]), _utc(row[6]), _utc(row[7]))
            for row in conn.execute(query)
        }


def summary(engine: Engine) -> dict[str, tuple[Any, ...]]:
    s = SESSIONS.c
    columns = (s.trace_count, s.step_count, s.total_tokens, s.violation_count, s.cost_nano)
    query = sa.select(s.session_id, *columns, s.started_at, s.last_activity)
    with engine.connect() as conn:
        return {row[0]: tuple(row[1:]) for row in conn.execute(query)}


def test_the_summary_is_what_grouping_the_traces_gives(engine: Engine) -> None:
    writer = StoreWriter(engine)
    at = T0
    writer.write_batch(
        [
            build_step("a1", at=at, session_id="s1", cost_nano=100),
            build_step("a2", at=at + timedelta(minutes=1), session_id="s1", violations=[DUP]),
            build_step("b1", at=at + timedelta(minutes=2), session_id="s2"),
            build_step("lone", at=at + timedelta(minutes=3)),  # no session
            build_step("late", at=at + timedelta(minutes=4)),  # joins s2 in a later batch
        ]
    )
    assert summary(engine) == grouped(engine) and set(grouped(engine)) == {"s1", "s2"}
    writer.write_batch(
        [
            # More steps of a1, one of them older than what it had: times widen both ways.
            build_step("a1", at=at - timedelta(minutes=5), session_id="s1", cost_nano=7),
            build_step("a1", at=at + timedelta(hours=1), session_id="s1"),
            # A trace seen without a session joins one: it brings everything it had.
            build_step("late", at=at + timedelta(hours=2), session_id="s2", cost_nano=3),
            # A session's first trace may be a refused request.
            RefusalRecord("refused", at + timedelta(hours=3), (DUP,), session_id="s3"),
            # A trace keeps the first session it was seen with.
            build_step("b1", at=at + timedelta(hours=4), session_id="other"),
        ]
    )
    merge_mcp_activity_in(engine, [("a2", at + timedelta(hours=5), 2)])  # MCP violations count
    assert summary(engine) == grouped(engine)
    assert set(grouped(engine)) == {"s1", "s2", "s3"}
    s1 = summary(engine)["s1"]
    assert s1[:5] == (2, 4, 60, 3, 107)
    assert (s1[5], s1[6]) == (at - timedelta(minutes=5), at + timedelta(hours=5))


def merge_mcp_activity_in(engine: Engine, activity: list[tuple[str, datetime, int]]) -> None:
    with engine.connect().execution_options(write=True) as conn, conn.begin():
        merge_mcp_activity(conn, activity)


def test_retention_takes_purged_traces_out_of_their_sessions(engine: Engine) -> None:
    old, recent = T0, T0 + timedelta(days=60)
    StoreWriter(engine).write_batch(
        [
            build_step("old-1", at=old, session_id="mixed", cost_nano=5),
            build_step("old-2", at=old + timedelta(minutes=1), session_id="gone"),
            build_step("new-1", at=recent, session_id="mixed", cost_nano=7),
            build_step("new-2", at=recent + timedelta(minutes=1), session_id="mixed"),
            build_step("old-3", at=old + timedelta(minutes=2), session_id="mixed"),
        ]
    )
    before = summary(engine)["mixed"]
    assert before[:5] == (4, 4, 60, 0, 12) and before[5] == old
    assert purge_batch(engine, old + timedelta(days=30), 2) == 2  # old-1, old-2
    assert summary(engine) == grouped(engine)
    assert purge_batch(engine, old + timedelta(days=30), 2) == 1  # old-3
    assert summary(engine) == grouped(engine)
    assert set(summary(engine)) == {"mixed"}  # a session whose traces all went, goes
    mixed = summary(engine)["mixed"]
    assert mixed[:5] == (2, 2, 30, 0, 7) and mixed[5] == recent  # it starts later now
    assert [s["session_id"] for s in session_summaries(engine)] == ["mixed"]


def test_two_replicas_keep_the_summary_exact(database: Database) -> None:
    engines = [make_engine(database.url), make_engine(database.url)]
    create_schema(engines[0])
    errors: list[BaseException] = []

    def replica(engine: Engine, worker: int) -> None:
        writer = StoreWriter(engine)
        try:
            for n in range(12):
                # Batches touch several traces and sessions, in orders that differ per worker;
                # some traces join their session only in a later batch.
                records = [
                    build_step(
                        f"t{(worker + n + k) % 5}",
                        at=T0 + timedelta(seconds=worker * 100 + n * 3 + k),
                        session_id=None if n < 2 else f"s{(worker + n + k) % 5 % 3}",
                        cost_nano=k,
                    )
                    for k in range(4)
                ]
                writer.write_batch(records)
        except BaseException as exc:
            errors.append(exc)

    workers = [
        threading.Thread(target=replica, args=(engine, index * 3 + t))
        for index, engine in enumerate(engines)
        for t in range(3)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert errors == []
    assert summary(engines[0]) == grouped(engines[0])
    assert sum(s[1] for s in summary(engines[0]).values()) == 6 * 12 * 4 - _steps_without(engines)
    for engine in engines:
        engine.dispose()


def _steps_without(engines: list[Engine]) -> int:
    """Steps of traces that never joined a session (none here: every trace joins one)."""
    t = TRACES.c
    with engines[0].connect() as conn:
        query = sa.select(sa.func.coalesce(sa.func.sum(t.step_count), 0))
        return int(conn.execute(query.where(t.session_id.is_(None))).scalar_one())


def test_the_sessions_list_pages_by_cursor_newest_first(engine: Engine) -> None:
    records = [
        build_step(f"t{n}", at=T0 + timedelta(minutes=n // 2), session_id=f"s{n:02d}")
        for n in range(11)
    ]  # two sessions a minute: equal last activity orders by session id
    StoreWriter(engine).write_batch(records)
    expected = sorted(((_utc(s[6]), key) for key, s in grouped(engine).items()), reverse=True)
    seen: list[str] = []
    cursor = None
    while True:
        page = sessions_page(engine, limit=3, cursor=cursor)
        assert len(page["sessions"]) <= 3
        seen += [s["session_id"] for s in page["sessions"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [key for _, key in expected]
    first = sessions_page(engine, limit=1)["sessions"][0]
    assert set(first) == {"session_id", "trace_count", "cost_usd", "last_activity", "started_at"}
    assert first["cost_usd"] is None  # steps, none priced: unknown, never a guessed 0
    assert first["last_activity"].endswith("Z")
