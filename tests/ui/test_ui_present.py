"""The viewer's presenter on read-API JSON, with and without the second release's fields."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from gateway.runs.status import Ending, TraceStatus, status_of
from gateway.ui.views import status as statuses
from gateway.ui.views.fmt import id_parts, money, one_line
from gateway.ui.views.items import TIMES, digest
from gateway.ui.views.present import TraceView, trace_view
from gateway.ui.views.rows import session_row, trace_row
from gateway.ui.views.shapes import RefusalView, StepView
from gateway.ui.views.text import text_view
from tests.factories import T_JSON, item_dict, step_dict, trace_dict, violation_dict

NOW = T_JSON + timedelta(hours=1)


def call(call_id: str, name: str = "get_incident", **fields: Any) -> dict[str, Any]:
    return item_dict("tool_call", call_id=call_id, tool_name=name, arguments="{}", **fields)


def result(call_id: str, text: str = "ok") -> dict[str, Any]:
    return item_dict("tool_result", call_id=call_id, text=text)


def user(text: str) -> dict[str, Any]:
    return item_dict("user", role="user", text=text)


def retried_trace() -> dict[str, Any]:
    """Step 2's stream dies mid tool-call, step 3 repeats its request, step 4 answers."""
    return trace_dict(
        [
            step_dict(1, at_ms=0, inputs=[user("Summarize the incident")], outputs=[call("c1")]),
            step_dict(
                2,
                at_ms=2000,
                stop="interrupted",
                inputs=[result("c1")],
                outputs=[call("c2", attrs={"incomplete": True})],
            ),
            step_dict(3, at_ms=4000, inputs=[result("c1")], outputs=[call("c2")]),
            step_dict(4, at_ms=9000, stop="completed", inputs=[result("c2", "owner: payments")]),
        ],
        [violation_dict("stream_interrupted", step_id="st-2", at_ms=3000, call_id="c2")],
    )


def view_of(trace: dict[str, Any], **kwargs: Any) -> TraceView:
    return trace_view(trace, now=kwargs.pop("now", NOW), **kwargs)


def steps_of(view: TraceView) -> dict[int, StepView]:
    return {row.seq: row for row in view.rows if isinstance(row, StepView)}


def test_a_result_answers_the_latest_call_with_its_id_and_retries_are_marked() -> None:
    steps = steps_of(view_of(retried_trace()))
    answer = steps[4].inputs[0]
    assert (
        answer.link == f"#{steps[3].outputs[0].anchor}" and answer.link_label == "↑ call · step 3"
    )
    assert steps[3].outputs[0].link == f"#{answer.anchor}"
    assert steps[3].outputs[0].link_label == "result ↓ step 4"
    assert steps[3].outputs[0].wait_ms == pytest.approx(4000)  # 5 s end of step 3 → 9 s
    assert steps[2].outputs[0].retry_note == "cut off, retried at step 3"
    assert steps[2].outputs[0].link is None  # the cut-off call was never answered
    assert steps[3].outputs[0].retry_note == "retry of step 2"
    assert (steps[2].retried_by, steps[3].retry_of) == (3, 2)
    assert steps[1].retried_by is None and steps[4].retry_of is None


def test_a_repeated_request_after_a_failed_step_is_a_retry_without_calls() -> None:
    trace = trace_dict(
        [
            step_dict(1, at_ms=0, stop="error", inputs=[user("hi")], error={"message": "boom"}),
            step_dict(2, at_ms=500, stop="completed", inputs=[user("hi")]),
        ]
    )
    steps = steps_of(view_of(trace))
    assert (steps[1].retried_by, steps[2].retry_of) == (2, 1)


def test_tool_spans_run_from_the_emitting_step_to_the_answering_request() -> None:
    view = view_of(retried_trace())
    steps = steps_of(view)
    tools = [s for s in steps[3].spans if s.kind == "tool"]
    assert len(tools) == 1 and tools[0].start == pytest.approx(5000)
    assert tools[0].width == pytest.approx(4000)
    assert "→ step 4 after 4.00 s" in tools[0].title
    assert not [s for s in steps[2].spans if s.kind != "wait" and s.kind != "stream"]
    assert [s.kind for s in steps[1].spans] == ["wait", "stream", "tool"]
    assert view.span_ms == pytest.approx(10_000)


def test_unanswered_calls_make_a_run_abandoned_when_idle_and_running_when_fresh() -> None:
    trace = trace_dict([step_dict(1, at_ms=0, inputs=[user("go")], outputs=[call("c1", "search")])])
    idle = view_of(trace)
    assert idle.header.status == "abandoned" and idle.header.tone == "warn"
    assert idle.header.ending == (
        "Abandoned: 1 tool call never answered; idle since 2025-03-01 09:00:01 UTC."
    )
    assert [s.kind for s in steps_of(idle)[1].spans][-1] == "unanswered"
    fresh = view_of(trace, now=T_JSON + timedelta(seconds=30))
    assert fresh.running and fresh.header.status == "running" and fresh.header.label == "running"
    assert "1 tool call awaiting results" in fresh.header.ending
    assert [s.kind for s in steps_of(fresh)[1].spans][-1] == "open"
    assert fresh.span_ms == pytest.approx(30_000)  # the open call reaches to now


@pytest.mark.parametrize(
    ("stored", "stop", "status"),
    [
        ("ok", "completed", "completed"),
        ("ok", "length", "failed"),
        ("ok", "content_filter", "failed"),
        ("error", "interrupted", "failed"),
        ("budget_exceeded", "tool_calls", "budget_exceeded"),
        ("completed", "tool_calls", "completed"),  # a store that knows the six statuses wins
        ("refused", "completed", "refused"),
    ],
)
def test_stored_statuses_and_older_ok_error(stored: str, stop: str, status: str) -> None:
    trace = trace_dict([step_dict(1, at_ms=0, stop=stop)], status=stored)
    header = view_of(trace).header
    assert header.status == status
    assert header.tone == {"completed": "ok", "failed": "bad"}.get(status, header.tone)


def test_an_enforced_refusal_after_the_last_step_means_refused() -> None:
    refusal = violation_dict("missing_tool_result", step_id=None, at_ms=3000, call_id="call_b")
    trace = trace_dict([step_dict(1, at_ms=0, outputs=[call("call_a"), call("call_b")])], [refusal])
    view = view_of(trace)
    assert view.header.status == "refused"
    assert (
        view.header.ending == "Refused: the last request broke missing tool result (call call_b)."
    )
    rows = view.rows
    assert isinstance(rows[1], RefusalView) and rows[1].kinds == ["missing_tool_result"]
    assert rows[1].items is None  # this store kept no items of the refused request
    assert rows[1].anchor == f"refusal-{refusal['id']}"
    later = trace_dict(
        [step_dict(1, at_ms=0), step_dict(2, at_ms=5000, stop="completed")], [refusal]
    )
    assert view_of(later).header.status == "completed"  # the agent fixed it and went on


def test_refusals_with_their_items_from_the_store() -> None:
    trace = trace_dict(
        [step_dict(1, at_ms=0, outputs=[call("call_a")])],
        status="refused",
        refusals=[
            {
                "id": "rf-1",
                "created_at": "2025-03-01T09:00:02Z",
                "kind": "orphan_tool_result",
                "call_id": "call_zz",
                "detail": "Result answers no call.",
                "enforced": True,
                "items": [result("call_zz", "stray")],
            }
        ],
    )
    refusal = view_of(trace).rows[1]
    assert isinstance(refusal, RefusalView) and refusal.anchor == "refusal-rf-1"
    assert refusal.items is not None and refusal.items[0].text == "stray"
    assert refusal.digest == "tool result" and refusal.offset_ms == pytest.approx(2000)


def test_time_split_cost_session_and_title_when_the_store_gives_them() -> None:
    steps = [
        step_dict(1, at_ms=0, cost_usd=0.0125, cost_source="genai-prices", tool_ms=None),
        step_dict(2, at_ms=5000, stop="completed", cost_usd=None, cost_source="unknown_model"),
    ]
    trace = trace_dict(
        steps,
        cost_usd=0.0125,
        duration_ms=6000.0,
        model_ms=2000.0,
        tool_ms=4000.0,
        session_id="sess-42",
        first_user_text="Plan   my\ntrip",
    )
    header = view_of(trace).header
    assert header.cost == "$0.01" and header.cost_note == "1 step of a model with no known price"
    assert [(s.kind, round(s.fraction, 2)) for s in header.shares] == [
        ("model", 0.33),
        ("tool", 0.67),
    ]
    assert header.shares[1].label == "tools and agent 4.00 s · 67%"
    assert header.session == "sess-42" and header.title == "Plan my trip"
    assert header.duration == "6.00 s"
    row = steps_of(view_of(trace))[1]
    assert (row.cost_usd, row.tool_ms) == (0.0125, None)


def test_time_and_title_are_derived_when_the_store_has_no_such_fields() -> None:
    trace = trace_dict(
        [
            step_dict(1, at_ms=0, latency_ms=1000, inputs=[user("First question?")]),
            step_dict(2, at_ms=4000, latency_ms=1000, stop="completed"),
        ]
    )
    view = view_of(trace)
    assert [(s.kind, s.ms) for s in view.header.shares] == [("model", 2000.0), ("tool", 3000.0)]
    assert view.header.cost == "—" and view.header.cost_note == "cost not recorded"
    assert view.header.title == "First question?" and view.header.session is None
    assert steps_of(view)[2].tool_ms == pytest.approx(3000)


def test_long_traces_load_step_bodies_on_demand_and_short_ones_open() -> None:
    short = view_of(retried_trace())
    assert short.open_rows and not short.lazy
    many = trace_dict([step_dict(n, at_ms=n * 1000) for n in range(1, 45)])
    long = view_of(many)
    assert long.lazy and not long.open_rows
    linked = trace_dict(
        [step_dict(n, at_ms=n * 1000, outputs=[call(f"c{n}")]) for n in range(1, 42)]
        + [step_dict(42, at_ms=50_000, inputs=[result("c41")])]
    )
    answer = steps_of(view_of(linked))[42].inputs[0]
    assert answer.link == "/traces/tr-json/steps/st-41#s41-out-0"  # another step's own page
    assert answer.link_step == "st-41"


def test_texts_keep_head_and_tail_mark_the_stores_cut_and_indent_json() -> None:
    lines = "\n".join(f"line {n}" for n in range(100))
    view = text_view(lines)
    assert view.head is not None and view.head.startswith("line 0\nline 1")
    assert view.tail is not None and view.tail.endswith("line 99")
    assert view.hidden_lines == 88
    cut_text = "head part\n[… 5,000 characters cut …]\ntail: Error!"
    cut = text_view(cut_text, cut=[9, 37])
    assert [(p.text, p.cut) for p in cut.pieces] == [
        ("head part", False),
        ("[… 5,000 characters cut …]", True),
        ("tail: Error!", False),
    ]
    assert (
        text_view('{"a": [1, 2]}', as_json=True).pieces[0].text
        == '{\n  "a": [\n    1,\n    2\n  ]\n}'
    )
    assert not text_view('{"a": ', as_json=True).pretty
    assert text_view("x", cut=[5, 9]).pieces[0].text == "x"  # a bad span is ignored


def test_items_fold_into_a_line_of_what_is_new() -> None:
    assert digest([result("a"), result("b")]) == "2 tool results"
    calls = [call("a", "grep"), call("b", "grep"), call("c", "read")]
    assert digest(calls) == f"3 tool calls grep {TIMES}2, read"
    assert digest([user("What   is\nthe weather?")]) == "user: What is the weather?"
    assert digest([]) == ""


def test_list_rows_read_optional_fields_and_tell_ids_apart() -> None:
    base = trace_dict([step_dict(1, at_ms=0, stop="completed")])
    del base["steps"], base["violations"]
    listed = {**base, "id": "tr-01a23106515f8d0349e9fdd36dd1", "last_stop_reason": "completed"}
    row = trace_row(listed, now=NOW, idle_seconds=300)
    assert (row.id_head, row.id_tail) == ("tr-01a23106515f8d0349e9", "fdd36dd1")
    assert row.status == "completed" and row.cost == "—" and row.cost_note == "cost not recorded"
    assert row.duration == "1.00 s" and row.preview is None
    rich = {
        **listed,
        "cost_usd": 1.5,
        "first_user_text": "Book\n a table " + "x" * 200,
        "session_id": "s1",
        "status": "failed",
    }
    row = trace_row(rich, now=NOW, idle_seconds=300)
    assert row.cost == "$1.50" and row.session == "s1" and row.status == "failed"
    assert (
        row.preview is not None
        and row.preview.startswith("Book a table x")
        and len(row.preview) <= 111
    )
    assert id_parts("ui-weather") == ("", "ui-weather")
    assert one_line("  a \n b  ") == "a b"
    session = session_row({"session_id": "s1", "trace_count": 3, "cost_usd": None})
    assert (session.traces, session.cost, session.href) == (3, "—", "/?session=s1")


def test_a_fresh_running_list_row_and_an_idle_one() -> None:
    ending = Ending(
        stored="ok",
        last_stop="tool_calls",
        last_step_end=T_JSON,
        last_refusal_at=None,
        last_step_start=T_JSON,
        open_calls=None,
        now=T_JSON + timedelta(seconds=10),
    )
    assert status_of(ending) == "running"
    assert status_of(replace(ending, now=NOW)) == "abandoned"


@pytest.mark.parametrize(
    ("usd", "shown"),
    [
        (None, "—"),
        (0, "$0"),
        (0.00002, "<$0.0001"),
        (0.0000499, "<$0.0001"),
        (0.00005, "$0.0001"),
        (0.0042, "$0.0042"),
        (1.234, "$1.23"),
        (1234.0, "$1,234"),
    ],
)
def test_a_tiny_cost_never_reads_as_free(usd: float | None, shown: str) -> None:
    assert money(usd) == shown


def test_a_refused_requests_tool_result_links_to_the_call_a_step_holds() -> None:
    call = item_dict("tool_call", call_id="call_7", tool_name="search", arguments="{}")
    step = step_dict(1, at_ms=0, outputs=[call])
    result = item_dict("tool_result", call_id="call_7", text="found")
    stray = item_dict("tool_result", call_id="call_none", text="?")
    refusal = violation_dict(
        "orphan_tool_result", step_id=None, at_ms=5000, call_id="call_none", items=[result, stray]
    )
    view = view_of(trace_dict([step], [refusal]))
    (refused,) = [row for row in view.rows if isinstance(row, RefusalView)]
    assert refused.items is not None
    linked, unlinked = refused.items
    assert linked.link == f"#{view.steps['st-1'].outputs[0].anchor}"
    assert linked.link_label == "↑ call · step 1" and linked.link_step == "st-1"
    assert unlinked.link is None  # no step holds it: the page says so


def test_tools_a_run_resends_are_shown_in_full_once() -> None:
    tools = [{"type": "function", "function": {"name": "search", "parameters": {}}}]
    steps = [
        step_dict(n, at_ms=n * 2000, tools=tools, tool_set="h1", params={"temperature": 0})
        for n in (1, 2)
    ]
    view = view_of(trace_dict(steps))
    first, second = view.steps["st-1"], view.steps["st-2"]
    assert first.same_tools_as is None and second.same_tools_as is first
    assert [t.name for t in second.request.tools] == ["search"]
    assert second.request.params == [("temperature", "0")]


def test_the_viewer_words_every_status_of_the_one_engine() -> None:
    assert sorted(statuses.STATUSES) == sorted(TraceStatus)
    assert set(statuses.LABELS) == set(statuses.TONES) == set(TraceStatus)
