"""Tool call ↔ result pairing rules over typed items."""

from __future__ import annotations

import pytest

from gateway.checks.pairing import check_continuation, check_history, first_enforceable, to_error
from gateway.errors import PairingViolation
from gateway.items import Violation, ViolationKind
from gateway.protocols.anthropic import messages as anthropic_messages
from gateway.protocols.registry import ADAPTERS
from tests.factories import (
    assistant_text,
    instruction,
    reasoning,
    tool_call,
    tool_result,
    user_text,
)

# How each protocol pairs calls and results, as its adapter declares it.
CHAT, RESPONSES, MESSAGES = (ADAPTERS[name].history for name in ("chat", "responses", "messages"))

ORPHAN = ViolationKind.ORPHAN_TOOL_RESULT
MISSING = ViolationKind.MISSING_TOOL_RESULT
DUPLICATE = ViolationKind.DUPLICATE_CALL_ID


def kinds(violations: list[Violation]) -> list[tuple[ViolationKind, str | None]]:
    return [(v.kind, v.call_id) for v in violations]


@pytest.mark.parametrize("protocol", ["chat", "responses", "messages"])
def test_clean_multi_turn_history_with_parallel_calls(protocol: str) -> None:
    history = [
        instruction(),
        user_text("weather in Paris and Oslo?"),
        reasoning(),
        assistant_text("Checking both."),
        tool_call(call_id="call_1"),
        tool_call(call_id="call_2"),
        tool_result("call_1"),
        tool_result("call_2"),
        reasoning(),
        tool_call(call_id="call_3", name="get_time"),
        tool_result("call_3"),
        assistant_text("Sunny in both."),
        user_text("thanks"),
        assistant_text("You are welcome."),
    ]
    assert check_history(history, history=ADAPTERS[protocol].history) == []


def test_history_without_tools_is_clean() -> None:
    history = [
        instruction(),
        user_text(),
        assistant_text(),
        user_text("more"),
        assistant_text("sure"),
    ]
    assert check_history(history, history=CHAT) == []
    assert check_history([], history=MESSAGES) == []


def test_result_for_unknown_call_is_orphan() -> None:
    history = [
        user_text(),
        tool_call(call_id="call_1"),
        tool_result("call_1"),
        tool_result("call_zzz"),
        assistant_text(),
    ]
    assert kinds(check_history(history, history=CHAT)) == [(ORPHAN, "call_zzz")]


def test_result_before_any_call_is_orphan() -> None:
    assert kinds(check_history([user_text(), tool_result("call_1")], history=RESPONSES)) == [
        (ORPHAN, "call_1")
    ]


def test_call_unanswered_before_next_user_turn_is_missing() -> None:
    history = [
        user_text(),
        tool_call(call_id="call_1"),
        tool_call(call_id="call_2", name="get_time"),
        tool_result("call_2"),
        user_text("?"),
    ]
    violations = check_history(history, history=CHAT)
    assert kinds(violations) == [(MISSING, "call_1")]
    assert "next user message" in violations[0].detail


def test_call_unanswered_before_next_assistant_turn_is_missing() -> None:
    history = [
        user_text(),
        tool_call(call_id="call_1"),
        instruction("note"),
        assistant_text("moving on"),
    ]
    assert kinds(check_history(history, history=CHAT)) == [(MISSING, "call_1")]


def test_call_unanswered_at_end_of_history_is_missing() -> None:
    history = [user_text(), assistant_text("let me look"), tool_call(call_id="call_1")]
    violations = check_history(history, history=MESSAGES)
    assert kinds(violations) == [(MISSING, "call_1")]
    assert "history ends" in violations[0].detail


def test_late_result_is_missing_only_in_chat_but_also_orphan_in_messages() -> None:
    history = [
        user_text(),
        tool_call(call_id="call_1"),
        user_text("wait"),
        assistant_text("hm"),
        tool_result("call_1"),
    ]
    assert kinds(check_history(history, history=CHAT)) == [(MISSING, "call_1")]
    assert kinds(check_history(history, history=MESSAGES)) == [
        (MISSING, "call_1"),
        (ORPHAN, "call_1"),
    ]


def test_duplicate_call_ids_in_one_turn() -> None:
    history = [
        user_text(),
        tool_call(call_id="call_1"),
        tool_call(call_id="call_1"),
        tool_result("call_1"),
        tool_result("call_1"),
    ]
    assert kinds(check_history(history, history=CHAT)) == [(DUPLICATE, "call_1")]


def test_duplicate_call_ids_across_turns() -> None:
    history = [
        user_text(),
        tool_call(call_id="call_1"),
        tool_result("call_1"),
        tool_call(call_id="call_1"),
        tool_result("call_1"),
    ]
    violations = check_history(history, history=CHAT)
    assert kinds(violations) == [(DUPLICATE, "call_1")]
    assert "item 3" in violations[0].detail and "item 1" in violations[0].detail


def test_two_results_for_one_call_are_duplicates() -> None:
    history = [
        user_text(),
        tool_call(call_id="call_1"),
        tool_result("call_1"),
        tool_result("call_1"),
    ]
    violations = check_history(history, history=CHAT)
    assert kinds(violations) == [(DUPLICATE, "call_1")]
    assert "already answered at item 2" in violations[0].detail


def test_same_tool_twice_answered_in_swapped_order_pairs_by_id() -> None:
    history = [
        user_text(),
        tool_call(call_id="call_a"),
        tool_call(call_id="call_b"),
        tool_result("call_b"),
        tool_result("call_a"),
    ]
    assert check_history(history, history=CHAT) == []
    assert check_history(history, history=MESSAGES) == []


def test_results_pair_by_position_when_ids_are_absent() -> None:
    history = [
        user_text(),
        tool_call(call_id=None, name="get_weather", internal_id="lw_0"),
        tool_call(call_id=None, name="get_time", internal_id="lw_1"),
        tool_result(None),
        tool_result(None),
        assistant_text(),
    ]
    assert check_history(history, history=CHAT) == []
    unanswered = [*history[:4], user_text("next")]
    assert kinds(check_history(unanswered, history=CHAT)) == [(MISSING, "lw_1")]


def test_id_less_results_pair_by_tool_name_when_named() -> None:
    history = [
        user_text(),
        tool_call(call_id=None, name="get_weather"),
        tool_result(None, name="get_time"),
    ]
    assert [v.kind for v in check_history(history, history=CHAT)] == [
        MISSING,
        ORPHAN,
    ]
    history = [
        user_text(),
        tool_call(call_id=None, name="a"),
        tool_call(call_id=None, name="b"),
        tool_result(None, name="b"),
        tool_result(None, name="a"),
    ]
    assert check_history(history, history=CHAT) == []


def test_id_less_results_do_not_reach_back_to_an_earlier_turn() -> None:
    history = [
        user_text(),
        tool_call(call_id=None),
        user_text("x"),
        tool_call(call_id=None),
        tool_result(None),
        tool_result(None),
    ]
    assert [v.kind for v in check_history(history, history=CHAT)] == [
        MISSING,
        ORPHAN,
    ]


def test_reasoning_opens_a_new_assistant_turn() -> None:
    history = [user_text(), reasoning(), tool_call(call_id="toolu_1"), tool_result("toolu_1")]
    history += [
        reasoning(),
        tool_call(call_id="toolu_2"),
        tool_result("toolu_2"),
        tool_result("toolu_1"),
    ]
    assert kinds(check_history(history, history=MESSAGES)) == [(DUPLICATE, "toolu_1")]
    history = [
        user_text(),
        tool_call(call_id="call_1"),
        instruction(),
        reasoning(),
        assistant_text(),
    ]
    (violation,) = check_history(history, history=CHAT)
    assert violation.detail.endswith("before the next assistant turn at item 3.")


def test_anthropic_result_must_answer_the_immediately_preceding_turn() -> None:
    earlier = [
        user_text(),
        assistant_text("a"),
        tool_call(call_id="toolu_1"),
        tool_result("toolu_1"),
    ]
    ok = [*earlier, assistant_text("b"), tool_call(call_id="toolu_2"), tool_result("toolu_2")]
    assert check_history(ok, history=MESSAGES) == []
    # toolu_1 is answered two turns later: missing in its own turn, orphan where it lands.
    late = [
        user_text(),
        tool_call(call_id="toolu_1"),
        tool_call(call_id="toolu_2"),
        tool_result("toolu_2"),
    ]
    late += [
        assistant_text("b"),
        tool_call(call_id="toolu_3"),
        tool_result("toolu_3"),
        tool_result("toolu_1"),
    ]
    violations = check_history(late, history=MESSAGES)
    assert kinds(violations) == [(MISSING, "toolu_1"), (ORPHAN, "toolu_1")]
    assert "immediately preceding assistant turn" in violations[1].detail
    # Chat Completions accepts the late answer as pairing an unanswered call.
    assert kinds(check_history(late, history=CHAT)) == [(MISSING, "toolu_1")]


def test_violations_come_in_history_order() -> None:
    history = [
        user_text(),
        tool_call(call_id="call_1"),
        tool_result("call_x"),
        tool_result("call_2"),
        user_text(),
    ]
    assert kinds(check_history(history, history=CHAT)) == [
        (MISSING, "call_1"),
        (ORPHAN, "call_x"),
        (ORPHAN, "call_2"),
    ]


def test_detail_names_tool_call_id_and_message_index() -> None:
    history = [
        user_text(),
        tool_call(call_id="call_1", name="search", message_index=4),
        user_text(),
    ]
    (violation,) = check_history(history, history=CHAT)
    assert "call_1" in violation.detail
    assert "search" in violation.detail
    assert "message 4" in violation.detail


def test_continuation_flags_recorded_calls_of_a_rewritten_assistant_turn() -> None:
    recorded = [
        assistant_text("on it"),
        tool_call(call_id="call_1", name="get_weather"),
        tool_call(call_id="call_2", name="get_time"),
    ]
    rewritten = [
        assistant_text("on it"),
        tool_call(call_id="call_x"),
        tool_call(call_id="call_y"),
        tool_result("call_x"),
        tool_result("call_y"),
    ]
    assert check_history([user_text(), *rewritten], history=CHAT) == []
    violations = check_continuation(recorded, rewritten)
    assert kinds(violations) == [(MISSING, "call_1"), (MISSING, "call_2")]
    assert violations[0].detail == (
        "The previous step emitted call call_1 (get_weather) but this request does not answer it."
    )


def test_continuation_accepts_answers_echoes_and_truncated_calls() -> None:
    recorded = [
        tool_call(call_id="call_1"),
        tool_call(call_id="call_2"),
        tool_call(call_id="call_3", incomplete=True),
    ]
    assert check_continuation(recorded, [tool_result("call_1"), tool_result("call_2")]) == []
    # An echoed but unanswered call is check_history's to report, not flagged twice.
    assert (
        check_continuation(
            recorded, [tool_call(call_id="call_1"), tool_call(call_id="call_2"), user_text()]
        )
        == []
    )
    assert kinds(check_continuation(recorded, [tool_result("call_1")])) == [(MISSING, "call_2")]


def test_continuation_pairs_id_less_calls_by_count_and_name() -> None:
    recorded = [
        tool_call(call_id=None, name="a", internal_id="lw_0"),
        tool_call(call_id=None, name="b", internal_id="lw_1"),
    ]
    assert check_continuation(recorded, [tool_result(None, name="a"), tool_result(None)]) == []
    assert kinds(check_continuation(recorded, [tool_result(None, name="b")])) == [(MISSING, "lw_0")]
    twice = [
        tool_call(call_id=None, name="a", internal_id="lw_0"),
        tool_call(call_id=None, name="a", internal_id="lw_1"),
    ]
    assert kinds(check_continuation(twice, [tool_result(None, name="a")])) == [(MISSING, "lw_1")]


def test_first_enforceable_skips_observe_only_kinds() -> None:
    observed = Violation(ViolationKind.TRUNCATED_TOOL_CALL, "cut off", call_id="call_0")
    orphan = Violation(ORPHAN, "x", call_id="call_1")
    assert first_enforceable([observed, orphan, Violation(MISSING, "y")]) is orphan
    assert first_enforceable([observed]) is None
    assert first_enforceable([]) is None


def test_error_names_rule_and_call_id() -> None:
    (violation,) = check_history([user_text(), tool_result("call_abc")], history=CHAT)
    error = to_error(violation, history=CHAT)
    assert isinstance(error, PairingViolation)
    assert error.status == 400
    assert (error.code, error.rule, error.call_id) == ("orphan_tool_result", ORPHAN, "call_abc")
    assert error.message == (
        "Loopwatch pairing check failed: orphan_tool_result: Tool result for call_abc "
        "(item 1) answers no earlier tool call. "
        "Set LOOPWATCH_PAIRING=observe to forward such requests."
    )
    assert error.param == "messages"
    assert to_error(violation, history=RESPONSES).param == "input"


def test_system_turns_inside_an_anthropic_history_break_no_pairing() -> None:
    """Claude Code puts `system` turns between the turns of its tool loop."""
    use = {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}
    answer = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a"}
    history = anthropic_messages.ADAPTER.parse_request(
        {
            "messages": [
                {"role": "user", "content": "List."},
                {"role": "system", "content": "Per-turn rule."},
                {"role": "assistant", "content": [use]},
                {"role": "system", "content": "Another rule."},
                {"role": "user", "content": [answer]},
                {"role": "system", "content": [{"type": "text", "text": "Last rule."}]},
            ]
        }
    ).items
    assert check_history(history, history=MESSAGES) == []
    unanswered = history[:4]
    assert kinds(check_history(unanswered, history=MESSAGES)) == [(MISSING, "toolu_1")]
