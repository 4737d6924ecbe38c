"""Which run started a new run, from its first user turn: sans-IO, on a scripted clock."""

from __future__ import annotations

import json

from gateway.continuation.lineage import (
    MAX_TASK_CHARS,
    RECENT_CALLS,
    Ambiguous,
    Lineages,
    first_user_turn,
    task_texts,
)
from gateway.items import Item
from gateway.step import Lineage
from tests.factories import assistant_text, instruction, tool_call, user_text

TASK = "Find why test_quotes fails and report the offending line."


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def agent(call_id: str, prompt: str = TASK) -> tuple[Item, ...]:
    arguments = json.dumps({"description": "Find the bug", "prompt": prompt})
    return (tool_call(arguments, call_id=call_id, name="Agent"),)


def test_task_texts_are_the_long_strings_of_the_arguments_nested_ones_too() -> None:
    arguments = json.dumps({"input": TASK, "n": 3, "opts": {"notes": [f"{TASK} again"]}})
    assert task_texts(arguments) == (TASK, f"{TASK} again")
    assert task_texts(json.dumps({"path": "src/a.py"})) == ()  # too short to be a task
    assert task_texts("{not json") == ()


def test_arguments_nested_past_the_parser_s_depth_hold_no_task() -> None:
    """A hostile provider's arguments: no task text, and the step is still recorded."""
    assert task_texts('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}") == ()


def test_the_first_user_turn_ends_at_the_first_answer() -> None:
    items = [instruction(), user_text("one"), user_text(TASK), assistant_text(), user_text("x")]
    assert first_user_turn(items) == f"one\n{TASK}"


def test_a_run_whose_turn_holds_one_recent_call_of_its_client_is_its_child() -> None:
    clock = Clock()
    lineages = Lineages(600, clock)
    lineages.step_ended("client-a", "parent", None, agent("toolu_1"))
    found = lineages.by_content("client-a", f"<reminder/>\n{TASK}")
    assert found is not None and not isinstance(found, Ambiguous)
    assert (found.trace_id, found.call_id) == ("parent", "toolu_1")
    assert found.lineage.child(found.trace_id, found.call_id, "content") == Lineage(
        "parent", 1, "parent", "toolu_1", "content"
    )
    assert lineages.by_content("client-b", TASK) is None  # another client's run
    clock.now += 601
    assert lineages.by_content("client-a", TASK) is None  # out of the window


def test_two_calls_holding_the_task_link_nothing() -> None:
    lineages = Lineages(600, Clock())
    lineages.step_ended("c", "one", None, agent("toolu_1"))
    lineages.step_ended("c", "two", None, agent("toolu_2"))
    assert lineages.by_content("c", TASK) == Ambiguous(2)


def test_a_grandchild_is_two_deep_under_the_same_root() -> None:
    lineages = Lineages(600, Clock())
    child = Lineage("root", 1, "root", "toolu_1", "content")
    lineages.linked("child", child)
    lineages.step_ended("c", "child", lineages.of("child"), agent("toolu_9", f"Deeper: {TASK}"))
    found = lineages.by_content("c", f"Deeper: {TASK}")
    assert found is not None and not isinstance(found, Ambiguous)
    assert found.lineage.child("child", "toolu_9", "content") == Lineage(
        "root", 2, "child", "toolu_9", "content"
    )
    assert lineages.of("root") is None  # a root is no run linked here


def test_a_files_content_is_no_task_and_the_calls_kept_are_bounded() -> None:
    content = "x" * (MAX_TASK_CHARS + 1)
    assert task_texts(json.dumps({"path": "big.txt", "content": content})) == ()
    lineages = Lineages(600, Clock())
    for n in range(RECENT_CALLS + 5):
        lineages.step_ended("c", f"run-{n}", None, agent(f"toolu_{n}", f"{TASK} [{n}]"))
    assert lineages.by_content("c", f"{TASK} [0]") is None  # the oldest went first
    found = lineages.by_content("c", f"{TASK} [{RECENT_CALLS + 4}]")
    assert found is not None and not isinstance(found, Ambiguous)
