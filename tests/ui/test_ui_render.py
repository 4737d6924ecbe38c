"""Templates rendered from read-API JSON with every optional field holding HTML: all escaped."""

from __future__ import annotations

import html
from datetime import timedelta
from typing import Any

from gateway.ui.pages.lists import FILTER_KEYS, ListQuery
from gateway.ui.pages.rendering import make_environment
from gateway.ui.views.present import trace_view
from gateway.ui.views.rows import session_row, trace_row
from tests.factories import T_JSON, item_dict, step_dict, trace_dict, violation_dict
from tests.ui.scenarios import IMG, SCRIPT

HOSTILE = f"{SCRIPT}{IMG}\"'><b>"
ENV = make_environment()


def hostile_trace() -> dict[str, Any]:
    call = item_dict("tool_call", call_id=f"c{IMG}", tool_name=f"t{SCRIPT}", arguments=HOSTILE)
    steps = [
        step_dict(
            1,
            at_ms=0,
            model=f"m{IMG}",
            inputs=[item_dict("user", role="user", text=HOSTILE)],
            outputs=[call],
            cost_usd=0.5,
            cost_source=HOSTILE,
            attrs={
                "requested_model": HOSTILE,
                "refusal_category": HOSTILE,
                "server_tool_requests": {HOSTILE: 2},
                "usage_by_model": {HOSTILE: {"prompt_tokens": 1}},
            },
        ),
        step_dict(
            2,
            at_ms=3000,
            stop="error",
            inputs=[item_dict("tool_result", call_id=f"c{IMG}", text=f'{{"x": "{SCRIPT}"}}')],
            error={"message": HOSTILE},
        ),
    ]
    refusal = violation_dict(
        "orphan_tool_result", step_id=None, at_ms=5000, call_id=HOSTILE, detail=HOSTILE
    )
    return trace_dict(
        steps,
        [violation_dict("invalid_tool_arguments", step_id="st-1", at_ms=900, detail=HOSTILE)],
        id=f"tr{IMG}",
        models=[f"m{IMG}"],
        session_id=HOSTILE,
        first_user_text=HOSTILE,
        cost_usd=0.5,
        cost_source=HOSTILE,
        refusals=[{**refusal, "items": [item_dict("tool_result", call_id=HOSTILE, text=HOSTILE)]}],
    )


def assert_escaped(text: str) -> None:
    assert SCRIPT not in text and "<img src=x" not in text and "<b>" not in text
    assert html.escape(SCRIPT) in text or "&lt;script&gt;" in text


def test_trace_and_step_pages_escape_every_field() -> None:
    view = trace_view(hostile_trace(), now=T_JSON + timedelta(hours=1))
    page = ENV.get_template("trace.html").render(view=view, path="/traces/x", auth_enabled=False)
    assert_escaped(page)
    assert page.count("&lt;script&gt;") >= 8  # title, session, items, error, refusal, ...
    step = next(iter(view.steps.values()))
    for name in ("step.html", "step_part.html"):
        text = ENV.get_template(name).render(
            s=step, view=view, previous=None, next=None, path="/x", auth_enabled=False
        )
        assert_escaped(text)
    for row in view.rows:
        assert_escaped(ENV.get_template("row_part.html").render(r=row, view=view))
    assert_escaped(ENV.get_template("top_part.html").render(view=view))


def test_list_and_sessions_pages_escape_every_field() -> None:
    listed = {
        **{k: v for k, v in hostile_trace().items() if k not in ("steps", "violations")},
        "violation_kinds": {"orphan_tool_result": 1},
        "last_stop_reason": "error",
    }
    row = trace_row(listed, now=T_JSON, idle_seconds=300)
    session = session_row({"session_id": HOSTILE, "trace_count": 1, "updated_at": T_JSON})
    sessions = ENV.get_template("sessions.html").render(
        sessions=[session], path="/sessions", auth_enabled=False
    )
    assert_escaped(sessions)
    assert "/?session=%3Cscript%3E" in sessions  # the link carries it percent-encoded
    text = ENV.get_template("traces.html").render(
        rows=[row],
        query=_query(),
        search=HOSTILE,
        searchable=False,
        statuses=[("completed", "completed")],
        ranges={},
        sorts={"time": "newest"},
        sort_url=lambda sort: "/",
        cursor=None,
        next_url="/",
        has_next=False,
        first_url="/",
        clear_search_url="/",
        live=False,
        models=[f"m{IMG}"],
        base_url="http://x",
        path="/",
        auth_enabled=False,
    )
    assert_escaped(text)


def _query() -> ListQuery:
    params: dict[str, str | None] = dict.fromkeys(FILTER_KEYS)
    return ListQuery({**params, "model": HOSTILE, "session": HOSTILE}, None, None, "time")


def test_a_step_shows_what_its_provider_said_beside_the_tokens() -> None:
    step = step_dict(
        1,
        at_ms=0,
        protocol="messages",
        model="claude-sonnet-4-6",
        stop="refusal",
        attrs={
            "requested_model": "claude-opus-4-6",
            "refusal_category": "cyber",
            "server_tool_requests": {"web_search": 3, "web_fetch": 1},
            "iterations": 2,
            "usage_by_model": {
                "claude-opus-4-6": {"prompt_tokens": 2000, "completion_tokens": 12},
                "claude-sonnet-4-6": {"prompt_tokens": 1520, "completion_tokens": 148},
            },
            "cache_write_1h_tokens": 2000,
        },
    )
    view = trace_view(trace_dict([step]), now=T_JSON + timedelta(hours=1))
    shown = next(iter(view.steps.values()))
    page = ENV.get_template("step_part.html").render(
        s=shown, view=view, previous=None, next=None, path="/x", auth_enabled=False
    )
    text = " ".join(html.unescape(page).split())
    assert "claude-sonnet-4-6 answered; claude-opus-4-6 asked for" in text
    assert "web search: 3, web fetch: 1" in text
    assert "Refusal category</dt><dd>cyber" in text
    assert "2 sampling iterations" in text
    assert "Tokens of claude-opus-4-6</dt><dd>2,012" in text
    assert "2,000 tokens" in text
    # A step without attrs (one stored before they were kept) shows none of it.
    plain = trace_view(trace_dict([step_dict(1, at_ms=0)]), now=T_JSON + timedelta(hours=1))
    page = ENV.get_template("step_part.html").render(
        s=next(iter(plain.steps.values())),
        view=plain,
        previous=None,
        next=None,
        path="/x",
        auth_enabled=False,
    )
    assert "asked for" not in page and "Provider tools" not in page
