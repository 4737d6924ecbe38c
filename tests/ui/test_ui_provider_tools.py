"""Tools the provider ran inside its answer, as the viewer shows them: a call with its result
beside it, run by the provider, owing nothing; never open, never unanswered, no tool bar to
a later step. A client call made by code the provider ran names that code's call."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

from gateway.ui.pages.rendering import make_environment
from gateway.ui.views.items import TIMES, digest
from gateway.ui.views.present import TraceView, trace_view
from gateway.ui.views.shapes import StepView
from tests.factories import T_JSON, item_dict, step_dict, trace_dict
from tests.ui.scenarios import IMG, SCRIPT

ENV = make_environment()
NOW = T_JSON + timedelta(hours=1)
RAN = {"executed_by": "provider"}
SEARCH_ID = "srvtoolu_01WYG3ziw53XMcoyKL4XcZmE"


def search_call(call_id: str = SEARCH_ID, query: str = "ESA news") -> dict[str, Any]:
    return item_dict(
        "tool_call",
        role="assistant",
        call_id=call_id,
        tool_name="web_search",
        arguments=f'{{"query":"{query}"}}',
        attrs={**RAN, "tool_type": "web_search"},
    )


def search_result(call_id: str = SEARCH_ID, text: str = "ESA launches probe") -> dict[str, Any]:
    return item_dict(
        "tool_result",
        role="assistant",
        call_id=call_id,
        text=text,
        is_error=False,
        attrs={**RAN, "tool_type": "web_search", "results": 1},
    )


def said(text: str) -> dict[str, Any]:
    return item_dict("assistant_text", role="assistant", text=text)


def user(text: str) -> dict[str, Any]:
    return item_dict("user", role="user", text=text)


def searched(status: str = "completed", **fields: Any) -> dict[str, Any]:
    """One answer: a web search the provider ran, its result, then the text it wrote."""
    step = step_dict(
        1,
        at_ms=0,
        stop="completed",
        inputs=[user("What did the ESA announce?")],
        outputs=[search_call(), search_result(), said("It launched a probe.")],
        protocol="anthropic",
    )
    return trace_dict([step], status=status, **fields)


def view_of(trace: dict[str, Any], now: Any = NOW) -> TraceView:
    return trace_view(trace, now=now)


def page(view: TraceView) -> str:
    return ENV.get_template("trace.html").render(view=view, path="/traces/x", auth_enabled=False)


def only_step(view: TraceView) -> StepView:
    (step,) = view.steps.values()
    return step


def test_a_search_the_provider_ran_is_paired_in_its_answer_and_owes_nothing() -> None:
    for stored in ("completed", None):  # the store's status, and one derived again
        view = view_of(searched(status=stored))
        assert view.header.status == "completed"
        assert view.header.ending == "Completed: the last step stopped completed."
        step = only_step(view)
        call, result, _ = step.outputs
        assert call.provider and result.provider and call.tool_type == "web_search"
        assert (call.link, call.link_label) == (f"#{result.anchor}", "result ↓")
        assert (result.link, result.link_label) == (f"#{call.anchor}", "↑ call")
        assert call.wait_ms is None  # the provider tells no duration
        assert [span.kind for span in step.spans] == ["wait", "stream"]


def test_the_page_shows_the_search_as_run_by_the_provider_with_its_result() -> None:
    html = page(view_of(searched()))
    call = html[html.index('id="s1-out-0"') :]
    call = call[: call.index("</li>")]
    assert "ran by the provider" in call and "web_search" in call
    assert re.search(r'<a class="pair" href="#s1-out-1"[^>]*>result ↓</a>', call)
    result = html[html.index('id="s1-out-1"') :]
    assert "ESA launches probe" in result[: result.index("</li>")]
    for wrong in ("never answered", "no result recorded", "no call recorded", "awaiting"):
        assert wrong not in html, wrong
    assert 'class="k-unanswered"' not in html and 'class="k-open"' not in html
    assert "provider ran web_search" in html  # the row's line


def test_a_running_trace_with_only_provider_calls_awaits_nothing() -> None:
    """Fresh, stopped `tool_calls`-like with only the provider's calls: nothing owed."""
    trace = searched(status=None)
    trace["steps"][0]["stop_reason"] = "paused"
    view = view_of(trace, now=T_JSON + timedelta(seconds=5))
    assert view.running and "awaiting" not in view.header.ending
    assert [span.kind for span in only_step(view).spans] == ["wait", "stream"]


def test_a_provider_call_without_its_result_is_not_unanswered() -> None:
    trace = searched(status=None)
    trace["steps"][0]["output_items"] = [search_call(), said("No results.")]
    view = view_of(trace)
    assert view.header.status == "completed"
    html = page(view)
    assert "no result from the provider" in html and "never answered" not in html
    assert 'class="k-unanswered"' not in html


def test_a_client_call_made_by_provider_code_names_its_caller_and_stays_owed() -> None:
    """Code the provider ran calls a client tool: the client owes that result (step 2
    answers it), and the code's own result comes in the second answer."""
    code = item_dict(
        "tool_call",
        call_id="srvtoolu_code",
        tool_name="code_execution",
        arguments='{"code":"print(1)"}',
        attrs={**RAN, "tool_type": "code_execution"},
    )
    client = item_dict(
        "tool_call",
        call_id="toolu_exp",
        tool_name="get_expenses",
        arguments="{}",
        attrs={"caller": "srvtoolu_code", "caller_type": "code_execution_20250825"},
    )
    ran = item_dict(
        "tool_result",
        call_id="srvtoolu_code",
        text="1234",
        attrs={**RAN, "tool_type": "code_execution", "return_code": 0},
    )
    steps = [
        step_dict(1, at_ms=0, inputs=[user("Total?")], outputs=[code, client]),
        step_dict(
            2,
            at_ms=3000,
            stop="completed",
            inputs=[item_dict("tool_result", call_id="toolu_exp", text="[1000, 234]")],
            outputs=[ran, said("$1234.")],
        ),
    ]
    view = view_of(trace_dict(steps, status="completed"))
    first, second = (view.steps[f"st-{n}"] for n in (1, 2))
    code_view, client_view = first.outputs
    assert (client_view.caller, client_view.caller_link) == ("srvtoolu_code", "#s1-out-0")
    assert client_view.caller_tool == "code_execution"
    assert client_view.link_label == "result ↓ step 2"  # the client's answer
    assert code_view.link_label == "result ↓ step 2" and code_view.wait_ms is None
    assert second.outputs[0].link_label == "↑ call · step 1"
    tools = [span for span in first.spans if span.kind == "tool"]
    assert len(tools) == 1 and "get_expenses" in tools[0].title  # the client's time only
    assert "code_execution" not in tools[0].title
    html = page(view)
    assert 'called by <a href="#s1-out-0">code_execution</a> <code>srvtoolu_code</code>' in html


def test_an_unanswered_client_call_beside_a_provider_call_is_still_owed() -> None:
    trace = searched(status=None)
    trace["steps"][0]["stop_reason"] = "tool_calls"
    trace["steps"][0]["output_items"].append(
        item_dict("tool_call", call_id="toolu_1", tool_name="get_weather", arguments="{}")
    )
    view = view_of(trace)
    assert view.header.status == "abandoned"
    assert view.header.ending.startswith("Abandoned: 1 tool call never answered")
    (bar,) = [span for span in only_step(view).spans if span.kind == "unanswered"]
    assert bar.title == "get_weather: never answered"
    assert "never answered" in page(view)  # and the legend names that bar


def test_the_digest_names_what_the_provider_ran_apart() -> None:
    outputs = [search_call(), search_result(), search_call("s2"), search_result("s2")]
    assert digest([*outputs, said("Done.")]) == f"provider ran web_search {TIMES}2 · assistant"
    client = item_dict("tool_call", call_id="c1", tool_name="get_weather")
    assert digest([search_call(), search_result(), client]) == (
        "provider ran web_search · tool call get_weather"
    )


def test_provider_fields_are_escaped() -> None:
    call = search_call(call_id=f"s{IMG}")
    call["tool_name"] = f"t{SCRIPT}"
    call["attrs"] = {**RAN, "tool_type": f"x{IMG}", "server": f"srv{SCRIPT}"}
    result = search_result(call_id=f"s{IMG}", text=f"found {SCRIPT}")
    client = item_dict(
        "tool_call", call_id="c1", tool_name="t", arguments="{}", attrs={"caller": f"k{IMG}"}
    )
    trace = searched()
    trace["steps"][0]["output_items"] = [call, result, client]
    html = page(view_of(trace))
    assert SCRIPT not in html and "<img src=x" not in html
    assert re.search(r"ran by the provider · x&lt;img", html)
    assert "srv&lt;script&gt;" in html and "called by code the provider ran" in html
