"""Trace status: the derivation table, folds in any order, and the SQL twin it recommends."""

from __future__ import annotations

import itertools
import sqlite3
from datetime import UTC, datetime, timedelta

import pytest

from gateway.config_load import load_settings
from gateway.items import Item, ItemKind, StopReason
from gateway.runs.status import (
    Ending,
    RefusalKind,
    StoredStatus,
    TraceStatus,
    TraceSummary,
    derive,
    emitted_calls,
    folded_stop,
    mark_terminal,
    settle,
    status_at,
    status_of,
)

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
IDLE = 300.0


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def step(
    summary: TraceSummary, start: float, stop: StopReason, open_calls: int = 0
) -> TraceSummary:
    return summary.with_step(
        started_at=at(start), ended_at=at(start + 2), stop=stop, open_calls=open_calls
    )


S = TraceSummary()
CASES = [
    # (summary, seconds after T0 when asked, status)
    (step(S, 0, StopReason.COMPLETED), 3, TraceStatus.COMPLETED),
    (step(S, 0, StopReason.REFUSAL), 3, TraceStatus.COMPLETED),
    (step(S, 0, StopReason.TOOL_CALLS, 2), 60, TraceStatus.RUNNING),
    (step(S, 0, StopReason.TOOL_CALLS, 2), 302, TraceStatus.ABANDONED),
    (step(S, 0, StopReason.TOOL_CALLS, 2), 10_000, TraceStatus.ABANDONED),
    (step(S, 0, StopReason.COMPLETED, 1), 60, TraceStatus.RUNNING),  # answer with open calls
    (step(S, 0, StopReason.COMPLETED, 1), 400, TraceStatus.ABANDONED),
    (step(S, 0, StopReason.UNKNOWN), 60, TraceStatus.RUNNING),
    (step(S, 0, StopReason.UNKNOWN), 400, TraceStatus.COMPLETED),
    (step(S, 0, StopReason.TOOL_CALLS), 400, TraceStatus.COMPLETED),  # a stop without calls
    # Paused mid-turn: the provider waits for the turn sent back, as for tool results.
    (step(S, 0, StopReason.PAUSED), 60, TraceStatus.RUNNING),
    (step(S, 0, StopReason.PAUSED), 400, TraceStatus.ABANDONED),
    (S, 0, TraceStatus.COMPLETED),
    *[
        (step(S, 0, stop), 3, TraceStatus.FAILED)
        for stop in (
            StopReason.ERROR,
            StopReason.INTERRUPTED,
            StopReason.CANCELLED,
            StopReason.LENGTH,
            StopReason.CONTENT_FILTER,
        )
    ],
    (step(S, 0, StopReason.ERROR), 10_000, TraceStatus.FAILED),
    # A refusal after the last step's start ends the trace, whatever the step said.
    (step(S, 0, StopReason.TOOL_CALLS, 1).with_refusal(RefusalKind.PAIRING, at(5)), 6, "refused"),
    (step(S, 0, StopReason.TOOL_CALLS, 1).with_refusal(RefusalKind.LOOP, at(5)), 900, "refused"),
    (
        step(S, 0, StopReason.TOOL_CALLS, 1).with_refusal(RefusalKind.BUDGET, at(5)),
        6,
        TraceStatus.BUDGET_EXCEEDED,
    ),
    # Refused while the last step was still streaming: still the last word.
    (
        step(S, 0, StopReason.COMPLETED).with_refusal(RefusalKind.BUDGET, at(1)),
        3,
        "budget_exceeded",
    ),
    # A refusal the agent got past (a later request was admitted) no longer counts.
    (
        step(S.with_refusal(RefusalKind.PAIRING, at(0)), 1, StopReason.COMPLETED),
        3,
        TraceStatus.COMPLETED,
    ),
    (S.with_refusal(RefusalKind.BUDGET, at(0)), 1, TraceStatus.BUDGET_EXCEEDED),
]


@pytest.mark.parametrize(("summary", "asked", "expected"), CASES)
def test_the_table(summary: TraceSummary, asked: float, expected: str) -> None:
    assert derive(summary, at(asked), IDLE) == expected


def test_idleness_is_measured_from_the_last_activity() -> None:
    summary = step(S, 0, StopReason.TOOL_CALLS, 1)  # ends at 2
    assert derive(summary, at(2 + IDLE - 0.001), IDLE) is TraceStatus.RUNNING
    assert derive(summary, at(2 + IDLE), IDLE) is TraceStatus.ABANDONED
    # A passthrough request (models list, embeddings) keeps it running, changes nothing else.
    later = summary.with_step(
        started_at=at(250), ended_at=at(251), stop=StopReason.UNKNOWN, open_calls=0,
        model_step=False,
    )  # fmt: skip
    assert later.last_stop is StopReason.TOOL_CALLS and later.open_calls == 1
    assert derive(later, at(400), IDLE) is TraceStatus.RUNNING
    assert derive(later, at(551), IDLE) is TraceStatus.ABANDONED


def test_folds_give_the_same_summary_in_any_order() -> None:
    events = [
        lambda s: step(s, 0, StopReason.TOOL_CALLS, 2),
        lambda s: step(s, 10, StopReason.TOOL_CALLS, 1),
        lambda s: step(s, 20, StopReason.COMPLETED),
        lambda s: s.with_refusal(RefusalKind.PAIRING, at(15)),
        lambda s: s.with_refusal(RefusalKind.BUDGET, at(5)),
    ]
    results = set()
    for order in itertools.permutations(events):
        summary = TraceSummary()
        for event in order:
            summary = event(summary)
        results.add(summary)
    [summary] = results
    assert summary.last_stop is StopReason.COMPLETED and summary.last_refusal_at == at(15)
    assert summary.last_activity_at == at(22)
    assert derive(summary, at(23), IDLE) is TraceStatus.COMPLETED


def test_settle_is_the_time_free_part() -> None:
    assert settle(step(S, 0, StopReason.LENGTH)) == StoredStatus(TraceStatus.FAILED, True)
    assert settle(step(S, 0, StopReason.TOOL_CALLS, 3)) == StoredStatus(
        TraceStatus.ABANDONED, False
    )
    assert all(
        settle(summary).status is not TraceStatus.RUNNING for summary, _, _ in CASES
    )  # running is only ever a matter of time
    assert status_at(StoredStatus(TraceStatus.COMPLETED, False), None, at(0)) == "completed"


def test_emitted_calls_count_what_the_agent_must_answer() -> None:
    def call(**attrs: object) -> Item:
        return Item(ItemKind.TOOL_CALL, call_id="c", tool_name="t", attrs=dict(attrs))

    items = [call(), call(), call(choice=1), call(incomplete=True), Item(ItemKind.ASSISTANT_TEXT)]
    assert emitted_calls(items) == 2


def test_terminal_output_tools_end_the_run() -> None:
    def called(*names: str) -> list[Item]:
        return [Item(ItemKind.TOOL_CALL, call_id=f"c{n}", tool_name=n) for n in names]

    calls = StopReason.TOOL_CALLS
    for names, extra, stop in [
        (("final_answer",), (), StopReason.COMPLETED),
        (("final_result",), (), StopReason.COMPLETED),
        (("submit",), ("submit",), StopReason.COMPLETED),
        (("submit",), (), calls),  # not configured: a call awaiting its result
        (("final_answer", "search"), (), calls),  # another call is still open
    ]:
        marked = mark_terminal(called(*names), extra)
        assert folded_stop(calls, marked) is stop, (names, extra)
        ended = step(S, 0, folded_stop(calls, marked), emitted_calls(marked))
        expected = TraceStatus.COMPLETED if stop is StopReason.COMPLETED else TraceStatus.RUNNING
        assert derive(ended, at(10), IDLE) is expected, names
    # A terminal call cut off by a length stop is no answer: the step failed.
    marked = mark_terminal(called("final_answer"))
    assert folded_stop(StopReason.LENGTH, marked) is StopReason.LENGTH


@pytest.mark.parametrize(
    ("stored", "stop", "refused", "asked", "expected"),
    [
        ("failed", "completed", None, 1, "failed"),  # one of the six: as stored
        ("ok", "tool_calls", None, 10, "running"),
        ("ok", "tool_calls", None, IDLE + 10, "abandoned"),
        (None, "unknown", None, 10, "running"),
        (None, "unknown", None, IDLE + 10, "completed"),
        (None, "completed", None, 10, "completed"),
        ("error", "tool_calls", None, 10, "failed"),
        (None, "length", None, 10, "failed"),
        ("ok", "completed", 1, 10, "refused"),  # refused after the last step began
        ("ok", "completed", -1, 10, "completed"),  # before it: a later request was admitted
    ],
)
def test_an_older_stores_ending_is_derived_by_the_table(
    stored: str | None, stop: str, refused: float | None, asked: float, expected: str
) -> None:
    ending = Ending(
        stored=stored,
        last_stop=stop,
        last_step_end=at(2),
        last_refusal_at=None if refused is None else at(refused),
        last_step_start=at(0),
        open_calls=None,
        now=at(2 + asked),
        idle_seconds=IDLE,
    )
    assert status_of(ending) == expected


def test_idle_seconds_setting() -> None:
    assert load_settings({}, {}).trace_idle_seconds == 300
    assert load_settings({}, {"LOOPWATCH_TRACE_IDLE_SECONDS": "60"}).trace_idle_seconds == 60


# The SQL twin the module docstring recommends, run on SQLite: same answers, by index.
SCHEMA = """
CREATE TABLE traces (id TEXT PRIMARY KEY, updated_at TEXT NOT NULL, status TEXT NOT NULL,
                     status_final BOOLEAN NOT NULL);
CREATE INDEX ix_traces_updated ON traces (updated_at, id);
CREATE INDEX ix_traces_status_updated ON traces (status, updated_at, id);
"""
STATUS_SQL = (
    "CASE WHEN status_final THEN status WHEN updated_at > :cut THEN 'running' ELSE status END"
)
FILTERS = {
    "running": "NOT status_final AND updated_at > :cut",
    "abandoned": "status = 'abandoned' AND updated_at <= :cut",
    "completed": "status = 'completed' AND (status_final OR updated_at <= :cut)",
    "failed": "status = 'failed'",
    "refused": "status = 'refused'",
    "budget_exceeded": "status = 'budget_exceeded'",
}


def test_the_recommended_sql_agrees_and_uses_an_index() -> None:
    db = sqlite3.connect(":memory:")
    db.executescript(SCHEMA)
    expected: dict[str, TraceStatus] = {}
    now = at(1000)
    for n, (summary, _, _) in enumerate(CASES):
        for shift in (0, 600, 990):  # the same summary seen long ago, recently, just now
            moved = _shifted(summary, shift)
            stored = settle(moved)
            trace_id = f"t{n}_{shift}"
            activity = moved.last_activity_at or T0
            db.execute(
                "INSERT INTO traces VALUES (?, ?, ?, ?)",
                (trace_id, activity.isoformat(), stored.status.value, stored.final),
            )
            expected[trace_id] = status_at(stored, moved.last_activity_at, now, IDLE)
    cut = {"cut": (now - timedelta(seconds=IDLE)).isoformat()}
    rows = db.execute(f"SELECT id, {STATUS_SQL} FROM traces", cut).fetchall()
    assert dict(rows) == {k: v.value for k, v in expected.items()}
    assert set(expected.values()) == set(TraceStatus)  # every status was exercised
    for status, where in FILTERS.items():
        found = {r[0] for r in db.execute(f"SELECT id FROM traces WHERE {where}", cut)}
        assert found == {k for k, v in expected.items() if v == status}, status
        plan = db.execute(
            f"EXPLAIN QUERY PLAN SELECT id FROM traces WHERE {where} "
            "ORDER BY updated_at DESC, id DESC LIMIT 50",
            cut,
        ).fetchall()
        # A search on an index, already in the listing's order: no scan, no sort.
        assert "SEARCH traces USING" in str(plan) and "TEMP B-TREE" not in str(plan), plan


def _shifted(summary: TraceSummary, seconds: float) -> TraceSummary:
    def move(value: datetime | None) -> datetime | None:
        return None if value is None else value + timedelta(seconds=seconds)

    return TraceSummary(
        last_step_started_at=move(summary.last_step_started_at),
        last_stop=summary.last_stop,
        open_calls=summary.open_calls,
        last_refusal_at=move(summary.last_refusal_at),
        last_refusal=summary.last_refusal,
        last_activity_at=move(summary.last_activity_at),
    )
