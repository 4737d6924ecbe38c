"""The trace MCP server's condensing and checking, without a store: a long run is cut to the
cap by whole steps with a note, arguments are checked against the tool's schema."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.ui.mcp_server import catalog, condensed
from gateway.ui.mcp_server.explain import explanation


def step(seq: int, *, stop: str = "tool_calls", text: str = "x" * 300) -> dict[str, Any]:
    call = {
        "kind": "tool_call",
        "call_id": f"call_{seq}",
        "tool_name": "bash",
        "arguments": {"cmd": "y" * 1000},
        "text": None,
        "is_error": None,
    }
    result = {"kind": "tool_result", "call_id": f"call_{seq - 1}", "text": "ok", "is_error": False}
    return {
        "id": f"st-{seq}",
        "seq": seq,
        "model": "m",
        "stop_reason": stop,
        "http_status": 200,
        "error": None,
        "usage": {"prompt_tokens": 10, "completion_tokens": 2},
        "cost_usd": None,
        "input_items": [result] if seq > 1 else [],
        "output_items": [{"kind": "assistant_text", "text": text, "call_id": None}, call],
    }


def trace(steps: list[dict[str, Any]], status: str = "abandoned") -> dict[str, Any]:
    return {"id": "tr-1", "status": status, "step_count": len(steps), "steps": steps}


def test_a_long_run_keeps_its_last_steps_and_says_what_was_cut() -> None:
    steps = [step(n) for n in range(1, 41)]
    shown = [
        condensed.condensed_step(s, condensed.results_by_call(trace(steps)), []) for s in steps
    ]
    text, kept, note = condensed.fitted("header", shown, 4000, keep_first=False)
    assert len(text) <= 4000 and kept and kept[-1]["step"] == 40
    assert note is not None and f"steps 1-{kept[0]['step'] - 1} left out" in note
    assert "from_step=1" in note and text.endswith(note)
    assert all(
        len(call["arguments"]) <= condensed.TEXT_CHARS for s in kept for call in s["tool_calls"]
    )
    text, kept, note = condensed.fitted("header", shown, 4000, keep_first=True)
    assert kept[0]["step"] == 1 and note is not None and f"from_step={kept[-1]['step'] + 1}" in note


def test_an_abandoned_run_names_the_call_that_never_came_back() -> None:
    said = explanation(trace([step(1), step(2)]))
    assert said.startswith("Run tr-1 was abandoned at step 2 of 2")
    assert "no result ever came back for bash (call call_2)" in said and said.endswith(".")


@pytest.mark.parametrize(
    ("arguments", "fault"),
    [
        ({"limit": 0}, "'limit' must be at least 1"),
        ({"limit": True}, "'limit' must be a integer"),
        ({"until": "soon"}, "RFC 3339"),
        ([], "arguments must be an object"),
    ],
)
def test_arguments_are_checked_against_the_schema(arguments: Any, fault: str) -> None:
    with pytest.raises(catalog.BadArguments, match=fault):
        catalog.checked("list_traces", arguments)


def test_defaults_and_times_are_filled_in() -> None:
    checked = catalog.checked("list_traces", {"since": "2026-01-02T03:04:05"})
    assert checked["limit"] == 10 and checked["since"].tzinfo is not None
