"""Read queries on SQLite and PostgreSQL: listing, filters, cursors, lookups."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

import pytest
from sqlalchemy.engine import Engine

from gateway.items import ItemKind, Violation, ViolationKind
from gateway.step import RefusalRecord, StepRecord
from gateway.store.read.queries import (
    find_by_conversation,
    find_by_held_state,
    find_by_response_id,
    find_continuation,
    find_step,
    get_trace,
    get_trace_summary,
    list_traces,
    list_violations,
    step_output_items,
)
from gateway.store.write.writer import StoreWriter

MakeStep = Callable[..., StepRecord]


def _seed(engine: Engine, make_step: MakeStep, count: int) -> list[str]:
    """`count` traces, trace i updated at minute i; returns ids newest first."""
    base = make_step().started_at
    records: list[StepRecord | RefusalRecord] = []
    for i in range(count):
        at = base + timedelta(minutes=i)
        violations = [Violation(ViolationKind.DUPLICATE_CALL_ID, "dup")] if i % 3 == 0 else []
        records.append(
            make_step(
                f"tr-{i:03d}", at=at, model="o3" if i % 2 else "gpt-4o", violations=violations
            )
        )
    StoreWriter(engine).write_batch(records)
    return [f"tr-{i:03d}" for i in reversed(range(count))]


def _all_pages(engine: Engine, limit: int, **filters: str) -> list[str]:
    ids: list[str] = []
    cursor = None
    while True:
        page = list_traces(engine, limit=limit, cursor=cursor, **filters)
        assert len(page["traces"]) <= limit
        ids.extend(t["id"] for t in page["traces"])
        cursor = page["next_cursor"]
        if cursor is None:
            return ids


def test_list_newest_first_across_pages(engine: Engine, make_step: MakeStep) -> None:
    newest_first = _seed(engine, make_step, 23)
    assert _all_pages(engine, 5) == newest_first
    assert _all_pages(engine, 23) == newest_first
    first = list_traces(engine, limit=3)
    assert [t["id"] for t in first["traces"]] == newest_first[:3]
    trace = first["traces"][0]
    assert set(trace) == {
        "id",
        "started_at",
        "updated_at",
        "status",
        "step_count",
        "models",
        "usage",
        "violation_count",
        "has_violations",
        "budget",
        "cost_usd",
        "cost_complete",
        "duration_ms",
        "model_ms",
        "tool_ms",
        "session_id",
        "first_user_text",
        "fork_of",
        "fork_at",
        "parent_trace_id",
        "root_trace_id",
        "depth",
        "tree",
    }
    assert trace["updated_at"].endswith("Z")


def test_cursor_is_stable_when_traces_share_a_timestamp(
    engine: Engine, make_step: MakeStep
) -> None:
    at = make_step().started_at
    StoreWriter(engine).write_batch([make_step(f"same-{i}", at=at) for i in range(7)])
    assert _all_pages(engine, 2) == [f"same-{i}" for i in reversed(range(7))]


def test_list_filters(engine: Engine, make_step: MakeStep) -> None:
    newest_first = _seed(engine, make_step, 12)
    odd = [t for t in newest_first if int(t[-3:]) % 2]
    assert _all_pages(engine, 4, model="o3") == odd
    every_third = [t for t in newest_first if int(t[-3:]) % 3 == 0]
    assert _all_pages(engine, 2, violation="duplicate_call_id") == every_third
    assert _all_pages(engine, 2, violation="orphan_tool_result") == []
    assert _all_pages(engine, 5, status="abandoned") == newest_first  # tool calls unanswered
    assert _all_pages(engine, 5, status="failed") == []
    both = [t for t in every_third if t in odd]
    assert _all_pages(engine, 1, model="o3", violation="duplicate_call_id") == both


def test_list_model_substring_time_range_and_violations(
    engine: Engine, make_step: MakeStep
) -> None:
    newest_first = _seed(engine, make_step, 12)
    odd = [t for t in newest_first if int(t[-3:]) % 2]
    assert _all_pages(engine, 4, model="O3") == odd  # any case
    assert _all_pages(engine, 4, model="PT-4") == [t for t in newest_first if t not in odd]
    assert _all_pages(engine, 4, model="%") == []  # wildcards are plain characters
    flagged = [t for t in newest_first if int(t[-3:]) % 3 == 0]
    assert _all_pages(engine, 3, has_violations=True) == flagged  # type: ignore[arg-type]
    clean = [t for t in newest_first if t not in flagged]
    assert _all_pages(engine, 3, has_violations=False) == clean  # type: ignore[arg-type]
    active = {t["id"]: t["updated_at"] for t in list_traces(engine, limit=200)["traces"]}
    since, until = (datetime.fromisoformat(active[t]) for t in ("tr-003", "tr-005"))
    window = list_traces(engine, since=since, until=until)["traces"]
    assert [t["id"] for t in window] == ["tr-005", "tr-004", "tr-003"]  # inclusive
    assert list_traces(engine, session="no such session")["traces"] == []


def test_list_sorted_by_steps_and_duration_across_pages(
    engine: Engine, make_step: MakeStep
) -> None:
    base = make_step().started_at
    records: list[StepRecord | RefusalRecord] = []
    for i in range(7):  # trace i has i % 4 + 1 steps, each 1 s apart
        for n in range(i % 4 + 1):
            records.append(make_step(f"tr-{i}", at=base + timedelta(minutes=i, seconds=n)))
    StoreWriter(engine).write_batch(records)
    by_steps = _all_pages(engine, 2, sort="steps")
    assert by_steps == ["tr-3", "tr-6", "tr-2", "tr-5", "tr-1", "tr-4", "tr-0"]
    assert _all_pages(engine, 3, sort="duration") == by_steps  # more steps took longer
    assert _all_pages(engine, 7, sort="duration") == by_steps
    cursor = list_traces(engine, limit=2, sort="steps")["next_cursor"]
    with pytest.raises(ValueError, match="invalid cursor"):
        list_traces(engine, cursor=cursor, sort="duration")  # a cursor of another order
    with pytest.raises(ValueError, match="unknown sort"):
        list_traces(engine, sort="colour")


@pytest.mark.parametrize("offset_s", [0, 37, 97, 409, 1201, 3607])
def test_equal_durations_tie_whatever_the_clock(
    engine: Engine, make_step: MakeStep, offset_s: int
) -> None:
    """Two runs of the same length sort by id, at any start time: durations are compared in
    whole milliseconds, not as the float noise of the times they come from."""
    base = make_step().started_at + timedelta(seconds=offset_s)
    records: list[StepRecord | RefusalRecord] = []
    for i in range(6):  # tr-0 … tr-5: three pairs of runs of equal length
        for n in range(i % 3 + 1):
            records.append(make_step(f"tr-{i}", at=base + timedelta(minutes=i, seconds=n)))
    StoreWriter(engine).write_batch(records)
    assert _all_pages(engine, 2, sort="duration") == [
        "tr-5",
        "tr-2",
        "tr-4",
        "tr-1",
        "tr-3",
        "tr-0",
    ]


def test_limit_is_capped_and_bad_cursor_rejected(engine: Engine, make_step: MakeStep) -> None:
    _seed(engine, make_step, 3)
    assert len(list_traces(engine, limit=10_000)["traces"]) == 3
    assert len(list_traces(engine, limit=0)["traces"]) == 1
    with pytest.raises(ValueError, match="invalid cursor"):
        list_traces(engine, cursor="not a cursor!")


def test_list_violations_pages_and_kind(engine: Engine, make_step: MakeStep) -> None:
    base = make_step().started_at
    refusals = [
        RefusalRecord(
            trace_id=f"r{i}",
            created_at=base + timedelta(seconds=i),
            violations=[
                Violation(ViolationKind.STEP_BUDGET_EXCEEDED, f"s{i}", enforced=True),
                Violation(ViolationKind.ORPHAN_TOOL_RESULT, f"o{i}", call_id=f"c{i}"),
            ],
        )
        for i in range(5)
    ]
    StoreWriter(engine).write_batch(refusals)
    seen: list[str] = []
    cursor = None
    while True:
        page = list_violations(engine, limit=3, cursor=cursor)
        seen.extend(v["detail"] for v in page["violations"])
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert len(seen) == 10
    assert sorted(seen[:2]) == ["o4", "s4"]  # newest first
    budget = list_violations(engine, limit=50, kind="step_budget_exceeded")
    assert [v["detail"] for v in budget["violations"]] == ["s4", "s3", "s2", "s1", "s0"]
    assert budget["next_cursor"] is None
    assert set(budget["violations"][0]) == {
        "id",
        "kind",
        "trace_id",
        "step_id",
        "call_id",
        "detail",
        "enforced",
        "created_at",
    }


def test_continuation_picks_the_longest_match(engine: Engine, make_step: MakeStep) -> None:
    short = make_step("t-short", continuation_key="k1")
    long = make_step("t-long", continuation_key="k3")
    StoreWriter(engine).write_batch([short, long, make_step("t-other", continuation_key="zz")])
    assert find_continuation(engine, ["k1", "k2", "k3", "k4"]) == ("t-long", long.id, "k3")
    assert find_continuation(engine, ["k1", "k2"]) == ("t-short", short.id, "k1")
    assert find_continuation(engine, ["nope"]) is None
    assert find_continuation(engine, []) is None


def test_continuation_prefers_the_latest_step_with_the_same_key(
    engine: Engine, make_step: MakeStep
) -> None:
    old = make_step("t-old", continuation_key="same")
    new = make_step("t-new", continuation_key="same", at=old.started_at + timedelta(hours=1))
    StoreWriter(engine).write_batch([new, old])
    assert find_continuation(engine, ["same"]) == ("t-new", new.id, "same")


def test_the_newest_step_of_a_conversation(engine: Engine, make_step: MakeStep) -> None:
    old = make_step("t-a", conversation_id="conv_1")
    new = make_step("t-a", conversation_id="conv_1", at=old.started_at + timedelta(minutes=1))
    StoreWriter(engine).write_batch([old, new, make_step("t-b", conversation_id="conv_2")])
    assert find_by_conversation(engine, "conv_1") == ("t-a", new.id)
    assert find_by_conversation(engine, "conv_9") is None


def test_the_step_whose_output_held_a_compaction(engine: Engine, make_step: MakeStep) -> None:
    compact = make_step("t-a", held_state="mark_1")
    StoreWriter(engine).write_batch([make_step("t-a"), compact, make_step("t-b")])
    assert find_by_held_state(engine, "mark_1") == ("t-a", compact.id)
    assert find_by_held_state(engine, "mark_9") is None


def test_lookups_by_ids(engine: Engine, make_step: MakeStep) -> None:
    step = make_step("t", provider_request_id="req_abc", response_id="resp_abc")
    StoreWriter(engine).write_batch([make_step("t"), step])
    expected = {"trace_id": "t", "step_id": step.id, "seq": 2}
    assert find_step(engine, step.id) == expected
    assert find_step(engine, "req_abc") == expected
    assert find_step(engine, "resp_abc") == expected
    assert find_step(engine, "missing") is None
    assert find_by_response_id(engine, "resp_abc") == ("t", step.id)
    assert find_by_response_id(engine, "req_abc") is None
    outputs = step_output_items(engine, step.id)
    assert outputs == list(step.output_items)
    assert [item.kind for item in outputs] == [ItemKind.ASSISTANT_TEXT, ItemKind.TOOL_CALL]


def test_missing_trace_and_summary(engine: Engine, make_step: MakeStep) -> None:
    assert get_trace(engine, "nope") is None
    assert get_trace_summary(engine, "nope") is None
    StoreWriter(engine).write_batch([make_step("t")])
    summary = get_trace_summary(engine, "t")
    assert summary is not None
    assert summary["step_count"] == 1
    assert "steps" not in summary
