"""An open background step as its store row's text and back: what another gateway needs to
end it (the record as far as its creation saw it, the continuation state, the terminal tools,
the budget reservation, where it went for prices) survives the round trip."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

from gateway.checks.budgets import Limits, Reservation
from gateway.exchange.closing import Budget, Opened
from gateway.items import Item, ItemKind, StopReason, Usage, Violation, ViolationKind
from gateway.proxy.background.shared import decode, encode
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
