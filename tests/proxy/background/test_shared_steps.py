"""An open background step as its store row's text and back: what another gateway needs to
end it (the record as far as its creation saw it, the continuation state, the terminal tools,
the budget reservation, where it went for prices) survives the round trip, redacted first."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal

from sqlalchemy import create_engine

from gateway.checks.budgets import Limits, Reservation
from gateway.config import RedactionSettings
from gateway.exchange.closing import Budget, Opened
from gateway.items import Item, ItemKind, StopReason, Usage, Violation, ViolationKind
from gateway.proxy.background.shared import SharedSteps, decode, encode
from gateway.redaction.redactor import Redactor
from gateway.step import StepRecord

T0 = datetime(2026, 12, 4, 12, tzinfo=UTC)
RECORD = StepRecord(
    id="s1",
    trace_id="t1",
    protocol="responses",
    method="POST",
    path="/v1/responses",
    started_at=T0,
    model="gpt-5",
    input_items=(Item(ItemKind.USER, "user", "Work on it."),),
    http_status=200,
    stop_reason=StopReason.UNKNOWN,
    raw_stop_reason="queued",
    usage=Usage(),
    response_id="resp_1",
    latency_ms=12.5,
    violations=(Violation(ViolationKind.ORPHAN_TOOL_RESULT, "from the request", call_id="c0"),),
    attrs={"requested_model": "gpt-5"},
)
HELD = Reservation("t1", tokens=100, steps_used=1, tokens_left=900, clamp=100, cost_held_nano=7)
BUDGET = Budget(Limits(max_tokens=1000, max_cost_usd=Decimal("0.25")), HELD)


def test_an_open_step_survives_its_row() -> None:
    tools = {"get_weather": {"type": "object"}, "anything": None}
    step = Opened(RECORD, b"\x01\xff", ("finish",), BUDGET, "https://api.openai.com/v1", tools)
    assert decode(encode(step)) == step


def test_an_open_step_without_budget_or_threading_survives_its_row() -> None:
    step = Opened(RECORD, None)
    assert decode(encode(step)) == step


def test_a_row_holds_the_step_as_redaction_lets_it_through() -> None:
    # A Responses input item with a reasoning summary, and a key the built-in rules catch.
    key = "sk-proj-Bg7mQ2xV9nL4kJ8hG3fD6sA1pZ0wE5rTy"
    items = (
        Item(ItemKind.USER, "user", f"Rotate {key}."),
        Item(ItemKind.REASONING, text=f"Thinking of {key}"),
    )
    record = replace(RECORD, input_items=items, params={"metadata": {"api_key": key}})
    tools = {"rotate": {"type": "object", "properties": {"key": {"default": key}}}}
    url = f"https://api.openai.com/v1/responses?note={key}"
    step = Opened(record, b"\x01\xff", ("finish",), BUDGET, url, tools)
    redactor = Redactor(RedactionSettings())
    shared = SharedSteps(create_engine("sqlite://"), lambda: T0, redactor, keep_summaries=False)

    stored = shared.redacted(step)
    assert key not in encode(stored)
    assert [i.text for i in stored.record.input_items] == ["Rotate [REDACTED:api_key].", None]
    assert stored.upstream_url == "https://api.openai.com/v1/responses?note=[REDACTED:api_key]"
    assert stored.tools == {
        "rotate": {"type": "object", "properties": {"key": {"default": "[REDACTED:api_key]"}}}
    }
    # What its end needs beside the record is no text of the request's.
    assert (stored.input_state, stored.terminal_tools, stored.budget) == (
        step.input_state,
        step.terminal_tools,
        step.budget,
    )
