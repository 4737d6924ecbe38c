"""The step's end, decided without I/O: scripted outcomes, timings and budgets in, the frozen
record and the I/O to perform out (settle or give back, remember, the response's end)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from gateway.checks.budgets import Limits, Reservation, Settlement
from gateway.continuation.keys import ContinuationKeys, call_filter_key
from gateway.exchange import closing
from gateway.exchange.closing import Budget, Clocks, StepFacts, Threading
from gateway.exchange.machine import Anomaly, AnomalyKind, Outcome
from gateway.exchange.stops import Ending
from gateway.items import (
    Billing,
    Item,
    ItemKind,
    Share,
    StopReason,
    Usage,
    Violation,
    ViolationKind,
)
from gateway.runs.pricing import Cost, CostSource
from gateway.step import StepStart

T0 = datetime(2025, 1, 1, 12, tzinfo=UTC)
KEYS = ContinuationKeys(b"k" * 32)
START = StepStart("s1", "t1", "chat", "POST", "/v1/chat/completions", T0, model="m")
THREADING = Threading(b"\x01\x02", attempt="a1")
FACTS = StepFacts(START, started=10.0, sent_at=10.002, threading=THREADING)
CLOCKS = Clocks(ended=10.5, first_chunk_at=10.1, observe_seconds=0.001)
CALL = Item(ItemKind.TOOL_CALL, "assistant", None, call_id="c1", tool_name="f", arguments="{}")
ANSWER = Outcome(
    Ending.BODY_ENDED,
    StopReason.TOOL_CALLS,
    http_status=200,
    output_items=(CALL,),
    usage=Usage(prompt_tokens=10, completion_tokens=5, total_tokens=15),
    response_id="r1",
    complete=True,
)
FAILED = Outcome(Ending.BODY_ENDED, StopReason.ERROR, http_status=500)
UNREACHABLE = Outcome(Ending.UNREACHABLE, StopReason.ERROR)
LEFT_WAITING = Outcome(Ending.CLIENT_GONE, StopReason.CANCELLED)
CUT = dataclasses.replace(ANSWER, ending=Ending.PROVIDER_BROKE, stop_reason=StopReason.INTERRUPTED)
COST = Cost(Decimal("0.000002"), CostSource.CONFIG)
HELD = Reservation("t1", tokens=100, steps_used=1, tokens_left=900, clamp=None)
BUDGET = Budget(Limits(max_tokens=1000), HELD)
CHARGED = dataclasses.replace(BUDGET, settled=True, charged=(15, 2000))


def test_an_answer_is_recorded_remembered_and_timed() -> None:
    previous = T0 - timedelta(seconds=3)
    clocks = dataclasses.replace(CLOCKS, previous_end=previous)
    closed = closing.close(ANSWER, clocks, FACTS, budget=BUDGET, cost=COST, keys=KEYS)
    record = closed.record
    assert (record.id, record.trace_id, record.model) == ("s1", "t1", "m")
    assert record.latency_ms == 500.0 and record.ttft_ms == 100.0
    assert record.ended_at == T0 + timedelta(milliseconds=500)
    assert record.tool_ms == 3000.0
    assert (record.cost_nano, record.cost_source) == (2000, "config")
    assert record.continuation_key == KEYS.step_key(THREADING.input_state, (CALL,))
    assert closed.settlement is None  # an answer keeps what it settled
    assert closed.response_end == record.ended_at
    assert closed.overhead_seconds == pytest.approx(0.003)
    remember = closed.remember
    assert remember is not None and remember.answered and remember.failed_attempt is None
    assert remember.known_keys == (record.continuation_key, call_filter_key("c1"))
    assert remember.ref.output_items == record.output_items
    assert remember.input_key == "0102"


@pytest.mark.parametrize(
    ("outcome", "budget", "settlement", "answered", "failed"),
    [
        # A failed attempt gives back its step and what its settlement counted.
        (FAILED, CHARGED, Settlement(dataclasses.replace(HELD, tokens=0), -15, -2000, 1), 0, 1),
        (UNREACHABLE, BUDGET, Settlement(dataclasses.replace(HELD, tokens=0), 0, 0, 1), 0, 1),
        # A client gone before the head: the step counts; nothing counted, nothing back.
        (LEFT_WAITING, BUDGET, None, 0, 1),
        (LEFT_WAITING, CHARGED, Settlement(dataclasses.replace(HELD, tokens=0), -15, -2000), 0, 1),
        # A cut stream answered in part: continued, and its retry still expected.
        (CUT, CHARGED, None, 1, 1),
        (ANSWER, None, None, 1, 0),
    ],
)
def test_what_each_ending_gives_back_and_remembers(
    outcome: Outcome,
    budget: Budget | None,
    settlement: Settlement | None,
    answered: int,
    failed: int,
) -> None:
    closed = closing.close(outcome, CLOCKS, FACTS, budget=budget, cost=None, keys=KEYS)
    assert closed.settlement == settlement
    assert closed.remember is not None
    assert closed.remember.answered is bool(answered)
    assert closed.remember.failed_attempt == ("a1" if failed else None)
    assert closed.record.continuation_key is None or answered


def test_a_passthrough_step_is_neither_priced_nor_timed_between_tools() -> None:
    facts = StepFacts(dataclasses.replace(START, protocol="passthrough"), 10.0, 10.0, False)
    clocks = dataclasses.replace(CLOCKS, previous_end=T0)
    closed = closing.close(ANSWER, clocks, facts, budget=None, cost=None, keys=KEYS)
    assert closed.record.tool_ms is None and closed.record.cost_source is None
    assert closed.response_end is None and closed.remember is None
    assert closed.record.continuation_key is None


def test_a_retry_has_no_tool_time_and_names_its_attempt() -> None:
    facts = dataclasses.replace(FACTS, threading=dataclasses.replace(THREADING, retry_of="s0"))
    clocks = dataclasses.replace(CLOCKS, previous_end=T0 - timedelta(seconds=1))
    closed = closing.close(ANSWER, clocks, facts, budget=None, cost=None, keys=KEYS)
    assert closed.record.tool_ms is None and closed.record.retry_of == "s0"


def test_anomalies_are_handed_on_and_the_outcome_is_closed_the_same_every_time() -> None:
    noted = (Anomaly(AnomalyKind.DELTA, "TextDelta in state ended"),)
    outcome = dataclasses.replace(ANSWER, anomalies=noted)
    first = closing.close(outcome, CLOCKS, FACTS, budget=BUDGET, cost=COST, keys=KEYS)
    again = closing.close(outcome, CLOCKS, FACTS, budget=BUDGET, cost=COST, keys=KEYS)
    assert first == again and first.anomalies == noted
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.record = again.record  # type: ignore[misc]


@pytest.mark.parametrize(
    ("budget", "usage", "charged", "settled"),
    [
        (BUDGET, Usage(total_tokens=15), (15, 0), Settlement(HELD, 15, 0)),
        # No usage report (a cancelled stream): the held tokens count as spent.
        (BUDGET, Usage(), (100, 0), Settlement(HELD, 100, 0)),
        (CHARGED, Usage(total_tokens=15), (15, 2000), None),  # settled once only
        (Budget(Limits(max_steps=3), HELD), Usage(total_tokens=15), (0, 0), None),
        (Budget(Limits(max_tokens=10)), Usage(total_tokens=15), (0, 0), None),
    ],
)
def test_settling_swaps_the_held_tokens_for_the_usage_once(
    budget: Budget, usage: Usage, charged: tuple[int, int], settled: Settlement | None
) -> None:
    after, settlement = closing.settle(budget, usage, None)
    assert settlement == settled and after.charged == charged


def test_the_step_keeps_what_the_provider_said_beside_its_tokens() -> None:
    opus, sonnet = Usage(2000, 10, 2010), Usage(1000, 300, 1300)
    outcome = dataclasses.replace(
        ANSWER,
        model="claude-sonnet-4-6",  # the fallback model that answered
        refusal_category="cyber",
        billing=Billing(
            {"web_search": 3},
            2,
            (Share("claude-opus-4-6", opus), Share(None, sonnet)),
            cache_write_1h_tokens=500,
        ),
    )
    start = dataclasses.replace(START, model="claude-opus-4-6")
    facts = dataclasses.replace(FACTS, start=start)
    record = closing.close(outcome, CLOCKS, facts, budget=None, cost=COST, keys=KEYS).record
    assert record.model == "claude-sonnet-4-6"
    assert record.attrs == {
        "requested_model": "claude-opus-4-6",
        "refusal_category": "cyber",
        "server_tool_requests": {"web_search": 3},
        "iterations": 2,
        "cache_write_1h_tokens": 500,
        "usage_by_model": {
            "claude-opus-4-6": {
                "prompt_tokens": 2000,
                "completion_tokens": 10,
                "total_tokens": 2010,
            },
            "claude-sonnet-4-6": {
                "prompt_tokens": 1000,
                "completion_tokens": 300,
                "total_tokens": 1300,
            },
        },
    }
    with pytest.raises(TypeError):
        record.attrs["iterations"] = 1  # type: ignore[index]


def test_a_step_answered_by_the_model_it_asked_for_has_no_attrs() -> None:
    plain = closing.close(ANSWER, CLOCKS, FACTS, budget=None, cost=COST, keys=KEYS).record
    assert plain.attrs is None and plain.model == "m"
    named = dataclasses.replace(ANSWER, model="m")
    assert (
        closing.close(named, CLOCKS, FACTS, budget=None, cost=COST, keys=KEYS).record.attrs is None
    )


QUEUED = Outcome(
    Ending.BODY_ENDED,
    StopReason.UNKNOWN,
    http_status=200,
    raw_stop_reason="queued",
    response_id="r1",
    complete=True,
    pending=True,
)
CUT_SHORT = Outcome(
    Ending.CLIENT_GONE,
    StopReason.CANCELLED,
    http_status=200,
    response_id="r1",
    violations=(Violation(ViolationKind.STREAM_INTERRUPTED, "cut"),),
)


@pytest.mark.parametrize(
    ("outcome", "open_", "ends"),
    [
        (QUEUED, True, False),
        (CUT_SHORT, True, False),  # a stream stopped short: the provider works on
        (ANSWER, False, True),
        (FAILED, False, False),  # an error status: no answer, nothing ends
        (UNREACHABLE, False, False),
        (LEFT_WAITING, False, False),
        (dataclasses.replace(CUT_SHORT, response_id=None), False, False),
        (dataclasses.replace(CUT_SHORT, error={"message": "x"}), False, False),
    ],
)
def test_what_a_background_exchange_leaves_open_or_ends(
    outcome: Outcome, open_: bool, ends: bool
) -> None:
    assert closing.left_open(outcome) is open_
    assert closing.ends_response(outcome) is ends


def test_a_response_never_seen_ending_is_unknown_without_its_cut() -> None:
    kept = Violation(ViolationKind.INVALID_TOOL_ARGUMENTS, "bad")
    outcome = dataclasses.replace(CUT_SHORT, violations=(*CUT_SHORT.violations, kept))
    unended = closing.unended(outcome)
    assert (unended.stop_reason, unended.violations) == (StopReason.UNKNOWN, (kept,))
    assert unended.response_id == "r1"


def test_a_step_ended_elsewhere_is_recorded_as_its_creating_gateway_would() -> None:
    # Created (queued: no output yet), then a poll through another gateway sees the end
    # 500 ms after the request arrived, as ANSWER says.
    queued = dataclasses.replace(
        ANSWER, output_items=(), usage=Usage(), pending=True, complete=False
    )
    opened = closing.opened(queued, CLOCKS, FACTS, budget=BUDGET, cost=None, keys=KEYS)
    assert (opened.record.stop_reason, opened.record.output_items) == (StopReason.UNKNOWN, ())
    assert opened.budget == BUDGET and opened.input_state == THREADING.input_state

    ended_at = T0 + timedelta(milliseconds=500)
    closed = closing.ended_elsewhere(opened, ANSWER, ended_at, cost=COST, keys=KEYS)
    here = closing.close(ANSWER, CLOCKS, FACTS, budget=BUDGET, cost=COST, keys=KEYS).record
    assert closed.record == here
    assert closed.settlement == Settlement(HELD, 15, 2000)  # settled once, with the end's usage
    assert closed.remember is not None and closed.remember.failed_attempt is None
