"""Output rules: truncated calls, invalid arguments, stop reasons that contradict the output."""

from __future__ import annotations

import pytest

from gateway.checks.output import arguments_problem, check_output
from gateway.items import Item, ItemKind, StopReason, Usage, ViolationKind
from gateway.stream.assembler import Assembled
from tests.factories import tool_call


def assembled(items: list[Item], stop: StopReason, raw: str | None) -> Assembled:
    return Assembled(output_items=items, stop_reason=stop, raw_stop_reason=raw, usage=Usage())


def test_clean_tool_calls_have_no_violation() -> None:
    result = assembled(
        [tool_call('{"city": "Oslo"}'), tool_call("")], StopReason.TOOL_CALLS, "tool_calls"
    )
    assert check_output(result) == []


def test_length_stop_truncates_every_call() -> None:
    items = [
        tool_call('{"city": "Os', call_id="call_1"),
        tool_call(None, call_id=None, internal_id="lwcall_0_1"),
    ]
    violations = check_output(assembled(items, StopReason.LENGTH, "length"))
    assert [(v.kind, v.call_id) for v in violations] == [
        (ViolationKind.TRUNCATED_TOOL_CALL, "call_1"),
        (ViolationKind.TRUNCATED_TOOL_CALL, None),
    ]
    assert "'get_weather' (call_1)" in violations[0].detail
    assert "lwcall_0_1" in violations[1].detail
    assert "output token limit" in violations[0].detail


def test_invalid_arguments_name_the_tool_and_call() -> None:
    items = [tool_call('{"city": "Oslo"', call_id="call_9")]
    (violation,) = check_output(assembled(items, StopReason.TOOL_CALLS, "tool_calls"))
    assert violation.kind is ViolationKind.INVALID_TOOL_ARGUMENTS
    assert violation.call_id == "call_9"
    assert violation.detail.startswith("The arguments of tool call 'get_weather' (call_9)")
    assert "not valid JSON" in violation.detail


def test_incomplete_calls_are_not_judged_on_arguments() -> None:
    items = [tool_call('{"ci', incomplete=True)]
    assert check_output(assembled(items, StopReason.INTERRUPTED, None)) == []


@pytest.mark.parametrize(
    ("arguments", "ok"),
    [
        ("{}", True),
        ("", True),
        ("  ", True),
        (None, True),
        ('{"a": [1]}', True),
        ("[1, 2]", False),
        ("null", False),
        ("{'a': 1}", False),
        ('{"a": 1}}', False),
    ],
)
def test_arguments_problem(arguments: str | None, ok: bool) -> None:
    assert (arguments_problem(arguments) is None) is ok


def test_tool_calls_stop_without_a_call() -> None:
    text = Item(ItemKind.ASSISTANT_TEXT, role="assistant", text="hi")
    (violation,) = check_output(assembled([text], StopReason.TOOL_CALLS, "tool_calls"))
    assert violation.kind is ViolationKind.STOP_REASON_MISMATCH
    assert "no tool call" in violation.detail


def test_calls_with_a_plain_stop() -> None:
    (violation,) = check_output(assembled([tool_call("{}")], StopReason.COMPLETED, "stop"))
    assert violation.kind is ViolationKind.STOP_REASON_MISMATCH
    assert "'stop'" in violation.detail and "1 tool call" in violation.detail


def test_other_choices_do_not_count_for_the_stop_reason() -> None:
    items = [tool_call("{}", choice=1)]
    assert check_output(assembled(items, StopReason.COMPLETED, "stop")) == []
