"""Reasoning a provider requires back (`reasoning_not_returned`), over typed items as the
adapters record them: what the previous step's answer marked, what the request echoes."""

from __future__ import annotations

import pytest

from gateway.checks.reasoning import check_returned, refusal
from gateway.errors import ReasoningNotReturned
from gateway.items import Item, ItemKind, Violation, ViolationKind
from tests.factories import (
    assistant_text,
    returned_reasoning,
    tool_call,
    tool_result,
    user_text,
)

KIND = ViolationKind.REASONING_NOT_RETURNED
ASK = user_text("weather in Paris?")
SIGNED = returned_reasoning("thinking", "sigdigest")  # an Anthropic thinking block's signature
PLAIN = returned_reasoning("reasoning_content")  # DeepSeek: only its presence is asked
CALL = tool_call(call_id="call_1")
RESULT = tool_result("call_1")


def check(previous: list[Item], echo: list[Item], new: list[Item]) -> list[Violation]:
    """A request whose history is the question, the echoed turn, then what is new."""
    return check_returned(previous, [ASK, *echo, *new], new)


@pytest.mark.parametrize(
    ("previous", "echo"),
    [
        pytest.param([SIGNED, CALL], [SIGNED, CALL], id="signed thinking sent back"),
        pytest.param([PLAIN, CALL], [PLAIN, CALL], id="reasoning_content sent back"),
        pytest.param([assistant_text(), CALL], [CALL], id="nothing is owed"),
        pytest.param(
            [SIGNED, returned_reasoning("thinking", "second"), CALL],
            [returned_reasoning("thinking", "sigdigest", "second"), CALL],
            id="two blocks recorded as one item, echoed as one",
        ),
        pytest.param(
            [CALL.with_changes(attrs={"returns": "thought_signature", "digests": ["g1"]})],
            [CALL.with_changes(attrs={"returns": "thought_signature", "digests": ["g1"]})],
            id="a thought signature on its call",
        ),
    ],
)
def test_a_tool_loop_that_sends_back_what_is_owed_passes(
    previous: list[Item], echo: list[Item]
) -> None:
    assert check(previous, echo, [RESULT]) == []


def test_dropped_thinking_is_a_violation() -> None:
    (violation,) = check([SIGNED, CALL], [CALL], [RESULT])
    assert violation.kind is KIND and violation.call_id is None and not violation.enforced
    assert "thinking" in violation.detail and "refuse" in violation.detail


def test_a_changed_payload_is_not_the_one_owed() -> None:
    echo = [returned_reasoning("thinking", "otherdigest"), CALL]
    assert [v.kind for v in check([SIGNED, CALL], echo, [RESULT])] == [KIND]


def test_the_count_of_missing_payloads_is_named() -> None:
    previous = [returned_reasoning("thinking", "a", "b"), CALL]
    (violation,) = check(previous, [returned_reasoning("thinking", "a"), CALL], [RESULT])
    assert "1 of 2" in violation.detail


def test_dropped_reasoning_content_is_a_violation() -> None:
    (violation,) = check([PLAIN, CALL], [assistant_text(), CALL], [RESULT])
    assert "reasoning_content" in violation.detail


def test_reasoning_of_an_earlier_turn_does_not_stand_for_the_echoed_one() -> None:
    earlier = [PLAIN, tool_call(call_id="call_0"), tool_result("call_0")]
    history = [ASK, *earlier, CALL, RESULT]
    assert [v.kind for v in check_returned([PLAIN, CALL], history, [RESULT])] == [KIND]


def test_a_dropped_thought_signature_names_its_call() -> None:
    signed = tool_call(call_id="call_1", returns="thought_signature", digests=["g1"])
    second = tool_call(call_id="call_2", name="get_time")
    (violation,) = check([signed, second], [CALL, second], [RESULT, tool_result("call_2")])
    assert violation.call_id == "call_1"
    assert "thought_signature" in violation.detail and "get_weather" in violation.detail


@pytest.mark.parametrize(
    "new",
    [
        pytest.param([user_text("never mind")], id="a new question, no results"),
        pytest.param([tool_result("call_other")], id="results for calls of no recorded step"),
        pytest.param(
            [tool_result("call_1", executed_by="provider")], id="a result the provider ran"
        ),
    ],
)
def test_only_a_tool_loop_owes_reasoning(new: list[Item]) -> None:
    assert check([SIGNED, CALL], [CALL], new) == []


def test_results_for_calls_not_echoed_are_left_to_pairing() -> None:
    assert check_returned([SIGNED, CALL], [ASK, RESULT], [RESULT]) == []


def test_only_the_choice_the_request_goes_on_from_is_owed() -> None:
    """`n > 1`: choice 1's thinking is not owed by a request that answers choice 0."""
    previous = [
        SIGNED,
        CALL,
        returned_reasoning("thinking", "choice1", choice=1),
        tool_call(call_id="call_c1", choice=1),
    ]
    assert check(previous, [SIGNED, CALL], [RESULT]) == []
    answering_1 = [tool_result("call_c1")]
    echo_1 = [tool_call(call_id="call_c1")]
    assert [v.kind for v in check(previous, echo_1, answering_1)] == [KIND]


def test_the_echoed_turn_spans_provider_run_items_and_untyped_blocks() -> None:
    ran = tool_call(call_id="srv_1", executed_by="provider")
    other = Item(ItemKind.OTHER, role="assistant", attrs={"type": "new_block"})
    echo = [SIGNED, ran, tool_result("srv_1", executed_by="provider"), other, CALL]
    assert check([SIGNED, CALL], echo, [RESULT]) == []


def test_observe_never_refuses() -> None:
    violations = check([SIGNED, CALL], [CALL], [RESULT])
    assert refusal(violations, "observe", param="messages") is None
    assert not violations[0].enforced


def test_enforce_refuses_with_the_rule_and_marks_the_violation() -> None:
    other = Violation(ViolationKind.MISSING_TOOL_RESULT, "x", "call_9")
    violations = [other, *check([SIGNED, CALL], [CALL], [RESULT])]
    error = refusal(violations, "enforce", param="messages")
    assert isinstance(error, ReasoningNotReturned)
    assert (error.status, error.code, error.param) == (400, "reasoning_not_returned", "messages")
    assert "reasoning_not_returned" in error.message
    assert "LOOPWATCH_REASONING_CHECK" in error.message
    assert [v.enforced for v in violations] == [False, True]


def test_enforce_without_such_a_violation_refuses_nothing() -> None:
    violations = [Violation(ViolationKind.MISSING_TOOL_RESULT, "x", "call_9")]
    assert refusal(violations, "enforce", param="messages") is None
