"""How a run ended, what it cost, where its time went: the writer's fold and its reads, on
SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

import pytest
from sqlalchemy.engine import Engine

from gateway.items import Item, ItemKind, StopReason, Usage, Violation, ViolationKind
from gateway.runs.status import TraceStatus
from gateway.step import StepRecord
from gateway.store.read.filters import TraceFilters
from gateway.store.read.queries import get_trace, get_trace_summary, list_traces
from gateway.store.read.sessions import sessions_page as list_sessions
from gateway.store.write.writer import StoreWriter
from tests.factories import T0, refusal, tool_result

MakeStep = Callable[..., StepRecord]
IDLE = 300.0
ANSWER = [Item(ItemKind.ASSISTANT_TEXT, role="assistant", text="done")]


def _status(engine: Engine, trace_id: str, now: datetime) -> str:
    trace = get_trace_summary(engine, trace_id, now=now, idle_seconds=IDLE)
    assert trace is not None
    return str(trace["status"])


def _seed_six(engine: Engine, make_step: MakeStep) -> datetime:
    """One trace per way a run ends; returns when the last of them went quiet."""
    at = T0
    writer = StoreWriter(engine)
    first = make_step("open", at=at)  # a tool call, never answered
    writer.write_batch([first])
    call_id = first.output_items[1].call_id or ""
    writer.write_batch(
        [
            make_step("done", at=at, stop_reason=StopReason.COMPLETED, output_items=ANSWER),
            make_step("broke", at=at, stop_reason=StopReason.ERROR, output_items=[]),
            make_step("refused", at=at),
            make_step("budget", at=at),
            make_step(
                "answered",
                at=at + timedelta(seconds=1),
                input_items=[tool_result(call_id, text="42")],
                stop_reason=StopReason.COMPLETED,
                output_items=ANSWER,
            ),
        ]
    )
    later = at + timedelta(seconds=2)
    writer.write_batch(
        [
            refusal("refused", later, kind="pairing"),
            refusal("budget", later, kind="budget", budget_exceeded=True),
        ]
    )
    return later


def test_each_way_a_run_ends(engine: Engine, make_step: MakeStep) -> None:
    quiet = _seed_six(engine, make_step)
    soon, late = quiet + timedelta(seconds=10), quiet + timedelta(seconds=IDLE + 1)
    expected_soon = {
        "open": "running",
        "done": "completed",
        "broke": "failed",
        "refused": "refused",
        "budget": "budget_exceeded",
        "answered": "completed",
    }
    assert {t: _status(engine, t, soon) for t in expected_soon} == expected_soon
    # Idle past trace_idle_seconds with its call unanswered: the agent died mid-loop.
    assert _status(engine, "open", late) == "abandoned"
    assert _status(engine, "done", late) == "completed"


@pytest.mark.parametrize("minutes", [0, 10])
def test_status_filter_agrees_with_the_shown_status(
    engine: Engine, make_step: MakeStep, minutes: int
) -> None:
    now = _seed_six(engine, make_step) + timedelta(seconds=5, minutes=minutes)
    shown = {
        t["id"]: t["status"]
        for t in list_traces(engine, limit=50, now=now, idle_seconds=IDLE)["traces"]
    }
    for status in TraceStatus:
        page = list_traces(
            engine, filters=TraceFilters(status=status.value), now=now, idle_seconds=IDLE
        )
        listed = {t["id"] for t in page["traces"]}
        assert listed == {i for i, s in shown.items() if s == status.value}, status
    assert set(shown.values()) >= {"completed", "failed", "refused", "budget_exceeded"}
    assert ("running" in shown.values()) is (minutes == 0)


def test_status_is_folded_from_all_steps_in_any_order(engine: Engine, make_step: MakeStep) -> None:
    writer = StoreWriter(engine)
    early = make_step("t", at=T0, stop_reason=StopReason.ERROR, output_items=[])
    late = make_step(
        "t", at=T0 + timedelta(seconds=5), stop_reason=StopReason.COMPLETED, output_items=ANSWER
    )
    writer.write_batch([late])
    writer.write_batch([early])  # an older step written late does not decide
    assert _status(engine, "t", T0) == "completed"
    # A refusal before the last step started did not end the run.
    writer.write_batch(
        [refusal("t", T0 + timedelta(seconds=1), kind="budget", budget_exceeded=True)]
    )
    assert _status(engine, "t", T0) == "completed"


def test_cost_sums_and_unknown_prices(engine: Engine, make_step: MakeStep) -> None:
    writer = StoreWriter(engine)
    writer.write_batch(
        [
            make_step("priced", cost_nano=1_500, cost_source="genai-prices"),
            make_step("priced", cost_nano=2_500, cost_source="config"),
        ]
    )
    writer.write_batch([make_step("priced", cost_nano=None, cost_source="unknown_model")])
    writer.write_batch([make_step("unknown", cost_nano=None, cost_source="unknown_model")])
    writer.write_batch([make_step("free", cost_nano=None, cost_source="no_usage", usage=Usage())])

    priced = get_trace(engine, "priced")
    assert priced is not None
    assert priced["cost_usd"] == pytest.approx(4e-6)
    assert priced["cost_complete"] is False  # one step has usage and no price
    steps = [(s["cost_usd"], s["cost_source"]) for s in priced["steps"]]
    assert steps == [(1.5e-6, "genai-prices"), (2.5e-6, "config"), (None, "unknown_model")]
    unknown = get_trace_summary(engine, "unknown")
    assert unknown is not None
    assert (unknown["cost_usd"], unknown["cost_complete"]) == (None, False)  # never a guessed 0
    free = get_trace_summary(engine, "free")
    assert free is not None and free["cost_complete"] is False and free["cost_usd"] is None


@pytest.mark.parametrize("batches", [1, 3])
def test_tool_time_model_time_and_duration(
    engine: Engine, make_step: MakeStep, batches: int
) -> None:
    steps = [
        make_step("t", at=T0, latency_ms=1_000.0),
        make_step("t", at=T0 + timedelta(seconds=3), latency_ms=500.0),  # 2 s of tool time
        # Sent before the previous response ended (parallel): no tool time, never negative.
        make_step("t", at=T0 + timedelta(seconds=3.2), latency_ms=100.0),
    ]
    writer = StoreWriter(engine)
    if batches == 1:
        writer.write_batch(list(reversed(steps)))
    else:
        for step in steps:
            writer.write_batch([step])
    trace = get_trace(engine, "t")
    assert trace is not None
    by_id = {s["id"]: s["tool_ms"] for s in trace["steps"]}
    assert [by_id[s.id] for s in steps] == [None, pytest.approx(2_000.0), 0.0]
    assert trace["tool_ms"] == pytest.approx(2_000.0)
    assert trace["model_ms"] == pytest.approx(1_600.0)
    assert trace["duration_ms"] == pytest.approx(3_500.0)  # first request to last response end


def test_sessions_and_first_user_text(engine: Engine, make_step: MakeStep) -> None:
    question = Item(ItemKind.USER, role="user", text="  what is\n the weather " + "x" * 400)
    writer = StoreWriter(engine)
    writer.write_batch(
        [
            make_step("a", at=T0, session_id=None, input_items=[question]),
            make_step("a", at=T0 + timedelta(seconds=1), session_id="s1", cost_nano=10),
            make_step("b", at=T0 + timedelta(seconds=2), session_id="s1", cost_nano=5),
            make_step("c", at=T0 + timedelta(seconds=9), session_id="s2"),
        ]
    )
    writer.write_batch([make_step("a", at=T0 + timedelta(seconds=3), session_id="other")])
    a = get_trace_summary(engine, "a")
    assert a is not None
    assert a["session_id"] == "s1"  # the first one seen stays
    assert a["first_user_text"] == ("what is the weather " + "x" * 400)[:300]
    listed = list_traces(engine, filters=TraceFilters(session="s1"))["traces"]
    assert [t["id"] for t in listed] == ["a", "b"]

    first = list_sessions(engine, limit=1)
    assert [s["session_id"] for s in first["sessions"]] == ["s2"]
    rest = list_sessions(engine, limit=1, cursor=first["next_cursor"])
    assert rest["next_cursor"] is None
    (s1,) = rest["sessions"]
    assert s1["trace_count"] == 2
    assert s1["cost_usd"] == pytest.approx(15e-9)
    assert s1["started_at"] == "2025-01-01T12:00:00.000000Z"
    assert s1["last_activity"] is not None and s1["last_activity"].endswith("Z")


def test_search_words_tool_names_and_id_prefixes(engine: Engine, make_step: MakeStep) -> None:
    result = Item(ItemKind.TOOL_RESULT, role="tool", text="sunny in Zanzibar", call_id="call_q")
    call = Item(
        ItemKind.TOOL_CALL, role="assistant", call_id="call_abc123", tool_name="get_weather"
    )
    writer = StoreWriter(engine)
    writer.write_batch(
        [
            make_step("trace-weather-1", input_items=[result], output_items=[call]),
            make_step("trace-other-2"),
        ]
    )

    def found(q: str) -> list[str]:
        return [t["id"] for t in list_traces(engine, filters=TraceFilters(q=q))["traces"]]

    assert found("zanzibar") == ["trace-weather-1"]  # a word of a tool result, any case
    assert found("get_weather") == ["trace-weather-1"]  # a tool name
    assert found("call_abc") == ["trace-weather-1"]  # a call id prefix
    assert found("trace-weath") == ["trace-weather-1"]  # a trace id prefix
    assert found("nowhere") == []
    both = TraceFilters(q="zanzibar", has_violations=True)
    assert list_traces(engine, filters=both)["traces"] == []


def test_refused_items_round_trip(engine: Engine, make_step: MakeStep) -> None:
    refused = [
        Item(ItemKind.TOOL_RESULT, role="tool", text="orphan", call_id="c9", attrs={"k": 1}),
        Item(ItemKind.USER, role="user", text="go on"),
    ]
    note = Violation(ViolationKind.MISSING_TOOL_RESULT, "noted", call_id="c8")
    enforced = Violation(
        ViolationKind.ORPHAN_TOOL_RESULT, "no call c9", call_id="c9", enforced=True
    )
    record = refusal("r", T0, violations=[note, enforced], kind="pairing", items=refused)
    StoreWriter(engine).write_batch([make_step("r", at=T0 - timedelta(seconds=5)), record])
    trace = get_trace(engine, "r")
    assert trace is not None
    assert trace["status"] == "refused"
    (shown,) = trace["refusals"]
    assert shown["kind"] == "orphan_tool_result"
    assert (shown["call_id"], shown["enforced"]) == ("c9", True)
    assert shown["items"] == [item.to_json() for item in refused]
    by_kind = {v["kind"]: v for v in trace["violations"]}
    assert by_kind["orphan_tool_result"]["items"] == shown["items"]
    assert "items" not in by_kind["missing_tool_result"]
