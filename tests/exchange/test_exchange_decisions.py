"""Every decision of a step made in the exchange, without sockets: the stop table for an
unreachable provider, the tool checks, loop detection and the anomalies the outcome carries.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

from gateway.checks.loops import TraceCounters
from gateway.checks.tools import DeclaredTools, ToolChecker
from gateway.exchange.calls import CallRules, LoopCounter
from gateway.exchange.machine import Anomaly, AnomalyKind, EndResponse, Exchange
from gateway.exchange.stops import RULES, Ending, Rule, Seen
from gateway.items import Item, StopReason, Violation, ViolationKind
from gateway.protocols.openai_chat.completions import ADAPTER
from tests.exchange.playbook import (
    DONE,
    STOP,
    TEXT,
    chunk,
    end,
    finished,
    head,
    observed,
    outcome_of,
    play,
    receive,
    settled,
)

WEATHER: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}
TOOLS: DeclaredTools = {"get_weather": WEATHER}
UNDECLARED = ViolationKind.UNDECLARED_TOOL
INVALID = ViolationKind.INVALID_TOOL_ARGUMENTS
TRUNCATED = ViolationKind.TRUNCATED_TOOL_CALL
MISMATCH = ViolationKind.STOP_REASON_MISMATCH
REPEATED = ViolationKind.REPEATED_TOOL_CALL
ERROR = {"message": "timed out", "type": "gateway", "code": "upstream_timeout"}


def calling(name: str, arguments: str, finish: str = "tool_calls") -> bytes:
    """A chat stream whose answer is one tool call, then the finish and the marker."""
    call = {"index": 0, "id": "call_1", "type": "function"}
    call["function"] = {"name": name, "arguments": arguments}
    delta = {"role": "assistant", "tool_calls": [call]}
    calls = chunk({"id": "c", "model": "m", "choices": [{"index": 0, "delta": delta}]})
    ending = {"index": 0, "delta": {}, "finish_reason": finish}
    return calls + chunk({"id": "c", "choices": [ending]}) + DONE


def judged(rules: CallRules, stream: bytes) -> list[Violation]:
    """The violations of the outcome of one streamed answer under `rules`."""
    commands = play(
        Exchange(ADAPTER, calls=rules),
        [
            (head(), []),
            (receive(stream), [observed(stream), settled(None)]),
            (end, [finished(ending=Ending.BODY_ENDED), EndResponse()]),
        ],
    )
    return list(outcome_of(commands).violations)


def rules(declared: DeclaredTools | None, loops: LoopCounter | None = None) -> CallRules:
    return CallRules(declared, ToolChecker(), loops or TraceCounters().for_trace("tr-1"))


def test_an_unreachable_provider_is_decided_by_the_stop_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    row = (Seen.NOTHING, Ending.UNREACHABLE)
    assert RULES[row].stop is StopReason.ERROR
    monkeypatch.setitem(RULES, row, Rule(StopReason.UNKNOWN, checks=False))
    play(
        Exchange(ADAPTER),
        [
            (
                lambda x: x.unreachable(504, ERROR),
                [
                    settled(None),
                    finished(
                        ending=Ending.UNREACHABLE,
                        stop_reason=StopReason.UNKNOWN,  # the row changed: the outcome follows
                        http_status=504,
                        error=ERROR,
                        violations=(),
                    ),
                ],
            ),
        ],
    )


@pytest.mark.parametrize(
    ("declared", "stream", "kinds"),
    [
        (TOOLS, calling("get_weather", '{"city": "Paris"}'), []),
        (TOOLS, calling("get_time", "{}"), [UNDECLARED]),
        (TOOLS, calling("get_weather", '{"town": "Paris"}'), [INVALID]),
        (None, calling("get_time", "{}"), []),  # the request's tools are unknown
        ({}, calling("get_weather", '{"city": "Paris"}'), [UNDECLARED]),  # it declared none
        # Output checks first, then the tool checks: one ordered list in the outcome.
        (TOOLS, calling("get_time", "{}", finish="stop"), [MISMATCH, UNDECLARED]),
        # Cut by the output limit: truncated, and its arguments are not held to the schema.
        (TOOLS, calling("get_weather", '{"town": "Pa', finish="length"), [TRUNCATED]),
        (TOOLS, TEXT + STOP + DONE, []),  # no tool call, nothing to judge
    ],
)
def test_tool_calls_are_judged_in_the_outcome(
    declared: DeclaredTools | None, stream: bytes, kinds: list[ViolationKind]
) -> None:
    assert [v.kind for v in judged(rules(declared), stream)] == kinds


def test_a_step_without_rules_leaves_its_calls_unjudged() -> None:
    """Passthrough and callers that pass no rules: the output checks alone."""
    commands = play(
        Exchange(ADAPTER),
        [
            (head(), []),
            (receive(stream := calling("get_time", "{}")), [observed(stream), settled(None)]),
            (end, [finished(stop_reason=StopReason.TOOL_CALLS, violations=()), EndResponse()]),
        ],
    )
    assert [item.tool_name for item in outcome_of(commands).output_items] == ["get_time"]


def test_a_loop_is_detected_across_a_traces_exchanges() -> None:
    counters = TraceCounters(threshold=3)
    same = calling("get_weather", '{"city": "Paris"}')
    spaced = calling("get_weather", '{ "city":"Paris" }')  # the same call, spelled otherwise
    table = [
        ("tr-a", same, []),
        ("tr-b", same, []),  # another trace counts its own
        ("tr-a", TEXT + STOP + DONE, []),  # no call: nothing counted
        ("tr-a", spaced, []),
        ("tr-a", same, [REPEATED]),  # the third time in tr-a
        ("tr-a", same, []),  # reported once
    ]
    for number, (trace, stream, kinds) in enumerate(table):
        found = judged(rules(TOOLS, counters.for_trace(trace)), stream)
        assert [v.kind for v in found] == kinds, f"row {number}"
    loop = counters.loop_of("tr-a")
    assert loop is not None and (loop.tool_name, loop.count) == ("get_weather", 3)
    assert counters.loop_of("tr-b") is None


class _BrokenCounter:
    def observe(self, output_items: Iterable[Item]) -> list[Violation]:
        raise RuntimeError("counter bug")


def test_a_failing_judge_loses_its_violations_not_the_step(
    caplog: pytest.LogCaptureFixture,
) -> None:
    stream = calling("get_time", "{}")
    assert judged(rules(TOOLS, _BrokenCounter()), stream) == []
    assert "judging a step's tool calls failed" in caplog.text


def test_a_delta_after_the_marker_is_an_anomaly_in_the_outcome() -> None:
    late = TEXT + STOP + DONE + TEXT
    commands = play(
        Exchange(ADAPTER),
        [
            (head(), []),
            (receive(late), [observed(late), settled(None)]),
            (end, [finished(stop_reason=StopReason.COMPLETED), EndResponse()]),
        ],
    )
    outcome = outcome_of(commands)
    assert outcome.anomalies == (Anomaly(AnomalyKind.DELTA, "TextDelta in state ended"),)
    assert outcome.violations == ()  # noted and ignored: the answer stands


def test_an_illegal_event_is_an_anomaly_in_the_outcome() -> None:
    exchange = Exchange(ADAPTER)
    clean = TEXT + STOP + DONE
    commands = play(
        exchange,
        [
            (receive(TEXT), []),  # before the head: ignored
            (head(), []),
            (receive(clean), [observed(clean), settled(None)]),
            (end, [finished(stop_reason=StopReason.COMPLETED), EndResponse()]),
        ],
    )
    anomalies = (Anomaly(AnomalyKind.EVENT, "chunk in phase waiting"),)
    assert outcome_of(commands).anomalies == anomalies


def test_a_clean_exchange_notes_no_anomaly() -> None:
    for exchange, events in [
        (Exchange(ADAPTER), [head(), receive(TEXT + STOP + DONE), end]),
        (Exchange(None), [head(200, "application/json"), receive(b"{}"), end]),
        (Exchange(ADAPTER), [lambda x: x.unreachable(502, ERROR)]),
    ]:
        commands = [c for event in events for c in event(exchange)]
        assert outcome_of(commands).anomalies == ()


def test_the_anomaly_kinds_are_the_metrics_labels() -> None:
    """/metrics declares each kind at 0 without importing the exchange: the lists agree."""
    from gateway.sinks.metrics import MetricsSink

    text = MetricsSink().exposition().decode()
    for kind in AnomalyKind:
        assert f'loopwatch_exchange_anomalies_total{{kind="{kind.value}"}} 0.0' in text
