"""The trace page's waterfall and header agree with what happened: bars inside their rows,
the steps' length as long as the Duration, the step budget as the ledger counted it, and the
first request's text as the title even when that request was refused."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest

from gateway.ui.pages.rendering import make_environment
from gateway.ui.views.present import TraceView, trace_view
from tests.factories import T_JSON, item_dict, step_dict, trace_dict, violation_dict

ENV = make_environment()
NOW = T_JSON + timedelta(hours=1)


def call(call_id: str) -> dict[str, Any]:
    return item_dict("tool_call", call_id=call_id, tool_name="search", arguments="{}")


def user(text: str) -> dict[str, Any]:
    return item_dict("user", role="user", text=text)


def page(view: TraceView) -> str:
    return ENV.get_template("trace.html").render(view=view, path="/traces/x", auth_enabled=False)


def bars(html: str) -> list[tuple[int, list[tuple[int, int]]]]:
    """Each row's view box width and its rects' (x, width), as the browser reads them."""
    found = []
    rows = re.findall(r'<svg class="c-bar" viewBox="0 0 (\d+) 10"[^>]*>(.*?)</svg>', html)
    for box, body in rows:
        rects = re.findall(r'<rect class="k-[a-z]+" x="(-?\d+)" width="(-?\d+)"/>', body)
        found.append((int(box), [(int(x), int(w)) for x, w in rects]))
    return found


def ended_with_an_unanswered_call(refused: bool) -> dict[str, Any]:
    """The last step asks for a tool nobody answers; maybe a refused request at its end."""
    steps = [
        step_dict(1, at_ms=0, latency_ms=1000, inputs=[user("go")], outputs=[call("c1")]),
        step_dict(2, at_ms=2000, latency_ms=1333.3, inputs=[], outputs=[call("c2")]),
    ]
    refusals = [violation_dict("loop_detected", step_id=None, at_ms=3333.3)] if refused else []
    return trace_dict(steps, refusals)


@pytest.mark.parametrize(
    ("seconds", "refused", "kind"),
    [(3600, True, "unanswered"), (3600, False, "unanswered"), (5, False, "open")],
)
def test_every_bar_lies_inside_its_rows_view_box(seconds: int, refused: bool, kind: str) -> None:
    trace = ended_with_an_unanswered_call(refused)
    view = trace_view(trace, now=T_JSON + timedelta(seconds=seconds))
    assert kind in {span.kind for row in view.rows for span in row.spans}
    for row in view.rows:
        for span in row.spans:
            assert span.start >= 0 and span.start + span.width <= view.span_ms, span
    drawn = bars(page(view))
    assert len(drawn) == len(view.rows)
    for box, rects in drawn:
        assert rects and all(x >= 0 and x + w <= box for x, w in rects), (box, rects)


def test_the_steps_length_is_the_duration_not_a_later_refusal_or_now() -> None:
    steps = [
        step_dict(1, at_ms=0, latency_ms=1000, inputs=[user("go")], outputs=[call("c1")]),
        step_dict(2, at_ms=1500, latency_ms=500, outputs=[call("c2")]),
    ]
    refusal = violation_dict("loop_detected", step_id=None, at_ms=9000)
    stored = trace_dict(steps, [refusal], duration_ms=2000.0)
    for trace in (stored, trace_dict(steps, [refusal])):  # with the store's figure and without
        for now in (NOW, T_JSON + timedelta(seconds=20)):  # idle, and running to this moment
            view = trace_view(trace, now=now)
            html = page(view)
            assert view.header.duration == "2.00 s"
            assert "<dt>Duration</dt><dd>2.00 s</dd>" in html
            assert '<span id="steps-elapsed">2.00 s</span> from first request to last' in html


def test_the_step_budget_counts_what_the_ledger_counted() -> None:
    """Three requests each answered 429 once and retried: the ledger gave the three failed
    attempts back, so the run used 3 of its 3 steps and stopped on its own."""
    steps = []
    for n in range(3):
        steps.append(step_dict(2 * n + 1, at_ms=2000 * n, stop="error", http_status=429))
        steps.append(step_dict(2 * n + 2, at_ms=2000 * n + 500, stop="completed"))
    trace = trace_dict(steps, budget={"max_steps": 3, "max_tokens": None})
    view = trace_view(trace, now=NOW)
    budget = view.header.step_budget
    assert budget is not None
    assert (budget.used, budget.limit, budget.over) == (3, 3, False)
    html = page(view)
    assert '<span class="budget-value">3 / 3</span>' in html
    assert "3 failed attempts not counted" in html
    assert 'class="meter over"' not in html


def test_a_step_budget_that_refused_a_request_is_drawn_spent() -> None:
    refusal = violation_dict("step_budget_exceeded", step_id=None, at_ms=2000)
    trace = trace_dict(
        [step_dict(1, at_ms=0, stop="completed")],
        [refusal],
        budget={"max_steps": 1, "max_tokens": None},
    )
    budget = trace_view(trace, now=NOW).header.step_budget
    assert budget is not None and (budget.used, budget.over) == (1, True)


def test_a_refused_first_requests_user_text_is_the_title() -> None:
    refusal = violation_dict("invalid_request", step_id=None, at_ms=0)
    refusal["items"] = [user("Plan the migration")]
    later = step_dict(1, at_ms=5000, inputs=[user("Plan it again")], stop="completed")
    for steps in ([], [later]):
        trace = trace_dict(steps, refusals=[refusal], first_user_text=None)
        view = trace_view(trace, now=NOW)
        assert view.header.title == "Plan the migration"
        assert "Plan the migration" in page(view)
