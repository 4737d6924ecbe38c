"""A request's new items against the recorded step's, without sockets: what counts as new,
what is ignored, and the first difference's summary and detail."""

from __future__ import annotations

from gateway.replay.compare import first_difference, new_items
from tests.factories.items import (
    assistant_text,
    instruction,
    reasoning,
    tool_call,
    tool_result,
    user_text,
)

HISTORY = [instruction(), user_text("Weather?"), tool_call('{"city": "Paris"}')]


def test_the_new_items_are_those_after_the_models_last_answer() -> None:
    assert new_items([*HISTORY, tool_result(text="Paris: sunny")]) == [
        tool_result(text="Paris: sunny")
    ]
    assert new_items([instruction(), user_text()]) == [instruction(), user_text()]
    # A history that ends with the model's answer adds nothing.
    assert new_items([user_text(), assistant_text()]) == []


def test_ids_reasoning_and_the_echoed_history_are_ignored() -> None:
    recorded = [*HISTORY, tool_result("call_1", text="Paris: sunny")]
    received = [
        instruction("another system prompt, before the model's answer"),
        user_text("Weather?"),
        tool_call('{"city":"Paris"}', call_id="call_x"),
        reasoning(),
        tool_result("call_x", text="Paris: sunny", item_id="x"),
    ]
    assert first_difference(2, recorded, received) is None


def test_the_first_difference_names_the_step_the_item_and_old_and_new() -> None:
    recorded = [*HISTORY, tool_result(text="Paris: sunny"), user_text("Thanks")]
    received = [*HISTORY, tool_result(text="Paris: rainy"), user_text("Thanks")]
    found = first_difference(2, recorded, received)
    assert found is not None
    assert found.summary() == (
        'replay diverged at step 2, new item 0: tool_result "Paris: sunny" → '
        'tool_result "Paris: rainy"'
    )
    assert found.detail() == {
        "step": 2,
        "item": 0,
        "recorded": {"kind": "tool_result", "role": "tool", "text": "Paris: sunny"},
        "received": {"kind": "tool_result", "role": "tool", "text": "Paris: rainy"},
    }


def test_an_item_added_or_left_out_is_a_difference() -> None:
    recorded = [*HISTORY, tool_result(text="Paris: sunny")]
    added = first_difference(2, recorded, [*recorded, user_text("And Rome?")])
    assert added is not None and (added.index, added.recorded) == (1, None)
    assert added.summary().endswith('(none) → user "And Rome?"')
    left_out = first_difference(2, recorded, HISTORY)
    assert left_out is not None and (left_out.index, left_out.received) == (0, None)
