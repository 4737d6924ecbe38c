"""Retention: old traces go with every row that belongs to them, in bounded passes, on SQLite
and PostgreSQL; recent traces and their rows stay, and no orphan row is left behind (in a
running gateway: tests/e2e/store/test_gateway_retention.py)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from gateway.background import Background
from gateway.items import Violation, ViolationKind
from gateway.step import RefusalRecord
from gateway.store import open_responses
from gateway.store.migrate import METADATA
from gateway.store.models import ITEMS, STEPS, TRACES, VIOLATIONS
from gateway.store.retention import sweep as retention
from gateway.store.retention import traces as trace_purge
from gateway.store.retention.sweep import LEDGER, Retention, purge_batch
from gateway.store.write.writer import StoreWriter
from tests.factories import build_step
from tests.store.deletes_counted import deletes_per_transaction

NOW = datetime(2026, 6, 1, tzinfo=UTC)
OLD = NOW - timedelta(days=40)
RECENT = NOW - timedelta(days=2)
# Every table and how its rows belong to a trace; a new table must be placed here (and
# purged by retention.purge_batch), or this fails.
OWNED = {
    "traces": "id",
    "steps": "trace_id",
    "violations": "trace_id",
    "budget_ledger": "trace_id",
    "trace_models": "trace_id",
}
BY_STEP = {"items": "step_id"}
SHARED = {"tool_sets"}  # by content: kept while any step refers to one
UNOWNED = {"meta", "mcp_tools"}
SUMMARIES = {"sessions"}  # their traces' sums: adjusted when traces go (test_session_summary)
# Purged with their trace, or by age when they belong to none (tests/mcp/test_mcp_retention.py).
MCP_OWNED = {"mcp_executions", "mcp_methods", "mcp_violations"}
BY_AGE = {"open_responses"}  # background responses never seen ending, by when they opened
TOOLS_OLD = [{"type": "function", "function": {"name": "only_old_runs_had_this"}}]
TOOLS_BOTH = [{"type": "function", "function": {"name": "every_run_has_this"}}]


def _trace(writer: StoreWriter, engine: Engine, trace_id: str, at: datetime) -> None:
    """Two steps with items and tools, a step violation, a refusal and a budget ledger row."""
    tools = TOOLS_OLD if at < NOW - timedelta(days=30) else TOOLS_BOTH
    violation = Violation(ViolationKind.MISSING_TOOL_RESULT, "never answered", call_id="c1")
    writer.write_batch(
        [
            build_step(trace_id, at=at, declared_tools=tools),
            build_step(
                trace_id,
                at=at + timedelta(seconds=5),
                violations=[violation],
                declared_tools=TOOLS_BOTH,
            ),
            RefusalRecord(trace_id, at + timedelta(seconds=9), [violation]),
        ]
    )
    with engine.begin() as conn:
        conn.execute(
            LEDGER.insert().values(
                trace_id=trace_id, steps=2, tokens_spent=30, tokens_in_flight=0, last_reserved=0
            )
        )


def _rows(engine: Engine) -> dict[str, list[dict[str, Any]]]:
    with engine.connect() as conn:
        return {
            name: [dict(row._mapping) for row in conn.execute(sa.select(table))]
            for name, table in METADATA.tables.items()
        }


def _trace_ids(rows: dict[str, list[dict[str, Any]]]) -> dict[str, set[str]]:
    step_trace = {row["id"]: row["trace_id"] for row in rows["steps"]}
    owned = {name: {row[column] for row in rows[name]} for name, column in OWNED.items()}
    owned["items"] = {step_trace.get(row["step_id"], "(orphan)") for row in rows["items"]}
    return owned


def _tool_sets(engine: Engine) -> list[dict[str, Any]]:
    return _rows(engine)["tool_sets"]


def assert_no_orphans(engine: Engine) -> None:
    rows = _rows(engine)
    traces = {row["id"] for row in rows["traces"]}
    steps = {row["id"] for row in rows["steps"]}
    assert {row["trace_id"] for row in rows["steps"]} <= traces
    assert {row["trace_id"] for row in rows["violations"]} <= traces
    assert {row["step_id"] for row in rows["violations"]} - {None} <= steps
    assert {row["trace_id"] for row in rows["budget_ledger"]} <= traces
    assert {row["step_id"] for row in rows["items"]} <= steps
    assert {row["hash"] for row in rows["tool_sets"]} <= {row["tool_set"] for row in rows["steps"]}


def test_every_table_is_known_to_retention() -> None:
    tables = {*OWNED, *BY_STEP, *SHARED, *UNOWNED, *MCP_OWNED, *SUMMARIES, *BY_AGE}
    assert set(METADATA.tables) == tables, "teach retention the new table"


def test_purge_deletes_old_traces_with_all_their_rows(engine: Engine) -> None:
    writer = StoreWriter(engine)
    for n in range(3):
        _trace(writer, engine, f"old-{n}", OLD + timedelta(minutes=n))
    for n in range(2):
        _trace(writer, engine, f"recent-{n}", RECENT)
    before = _rows(engine)
    assert all(_trace_ids(before)[name] >= {"old-0", "recent-0"} for name in (*OWNED, *BY_STEP))
    cutoff = NOW - timedelta(days=30)

    assert [purge_batch(engine, cutoff, 2) for _ in range(3)] == [2, 1, 0]

    after = _rows(engine)
    for name, ids in _trace_ids(after).items():
        assert ids == {"recent-0", "recent-1"}, name
    kept_steps = {row["id"] for row in before["steps"] if row["trace_id"].startswith("recent")}
    kept_items = [row for row in before["items"] if row["step_id"] in kept_steps]
    by_id = sorted(after["items"], key=lambda row: row["id"])
    assert len(kept_items) == 16 and by_id == sorted(kept_items, key=lambda row: row["id"])
    assert after["meta"] == before["meta"]
    names = [row["tools"][0]["function"]["name"] for row in after["tool_sets"]]
    assert len(before["tool_sets"]) == 2 and names == ["every_run_has_this"]
    assert_no_orphans(engine)


def test_purge_forgets_background_responses_left_open_past_the_cutoff(engine: Engine) -> None:
    for response_id, at in (("resp_old", OLD), ("resp_recent", RECENT)):
        open_responses.put(engine, response_id, "trace-bg", f"step-{response_id}", at, "{}")

    assert purge_batch(engine, NOW - timedelta(days=30), 10) == 0  # no trace went

    assert [row["response_id"] for row in _rows(engine)["open_responses"]] == ["resp_recent"]


def test_purge_commits_a_bounded_number_of_steps_at_a_time(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long run and many short ones go in transactions of a few steps each, so the
    recorder waiting for the write lock is never held up by one large delete."""
    monkeypatch.setattr(retention, "STEPS_PER_TRANSACTION", 4)
    monkeypatch.setattr(trace_purge.time, "sleep", lambda _: None)
    writer = StoreWriter(engine)
    long_run = [build_step("old-long", at=OLD + timedelta(seconds=n)) for n in range(11)]
    writer.write_batch(long_run)
    for n in range(5):
        _trace(writer, engine, f"old-{n}", OLD + timedelta(minutes=n + 1))
    _trace(writer, engine, "recent", RECENT)
    with deletes_per_transaction(engine, "DELETE FROM steps") as deleted_steps:
        assert purge_batch(engine, NOW - timedelta(days=30), 100) == 6

    assert max(deleted_steps) <= 4 and sum(deleted_steps) == 11 + 5 * 2
    with engine.connect() as conn:
        assert list(conn.execute(sa.select(TRACES.c.id)).scalars()) == ["recent"]
    assert_no_orphans(engine)


def test_tool_sets_of_a_drained_run_go_once_the_pass_is_done(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long run's steps go a slice at a time; the tool sets only they used go with them
    (checked once, after the pass), those a recent step still uses stay."""
    monkeypatch.setattr(retention, "STEPS_PER_TRANSACTION", 4)
    monkeypatch.setattr(trace_purge.time, "sleep", lambda _: None)
    writer = StoreWriter(engine)
    long_run = [
        build_step(
            "old-long",
            at=OLD + timedelta(seconds=n),
            declared_tools=TOOLS_OLD if n < 6 else TOOLS_BOTH,
        )
        for n in range(11)
    ]
    writer.write_batch(long_run)
    _trace(writer, engine, "recent", RECENT)
    assert len(_rows(engine)["tool_sets"]) == 2

    assert purge_batch(engine, NOW - timedelta(days=30), 100) == 1

    after = _rows(engine)
    assert {row["trace_id"] for row in after["steps"]} == {"recent"}
    names = [row["tools"][0]["function"]["name"] for row in after["tool_sets"]]
    assert names == ["every_run_has_this"]
    assert_no_orphans(engine)


async def test_background_purge_runs_bounded_passes_until_done(engine: Engine) -> None:
    writer = StoreWriter(engine)
    for n in range(5):
        _trace(writer, engine, f"old-{n}", OLD)
    _trace(writer, engine, "recent", RECENT)
    purged: list[int] = []
    retention = Retention(
        engine, 30, clock=lambda: NOW, batch_size=2, pause=0.01, on_purged=purged.append
    )
    retention.start(Background())
    for _ in range(500):
        if retention.purged_total == 5:
            break
        await asyncio.sleep(0.01)
    await retention.close()  # does not wait out the hour until the next sweep
    assert purged == [2, 2, 1] and retention.passes == 3
    with engine.connect() as conn:
        assert list(conn.execute(sa.select(TRACES.c.id)).scalars()) == ["recent"]
        for table in (STEPS, ITEMS, VIOLATIONS, LEDGER):
            assert conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one() > 0
    assert_no_orphans(engine)
