"""Tool calls against declared tools: undeclared names, schema breaks, hostile schemas."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from gateway.checks.output import arguments_problem
from gateway.checks.tools import MAX_ARGUMENT_CHARS, ToolChecker
from gateway.items import Item, ItemKind, ViolationKind
from tests.factories import tool_call

WEATHER: dict[str, Any] = {
    "type": "object",
    "properties": {
        "location": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
            "required": ["city", "unit"],
        },
        "days": {"type": "integer", "minimum": 1},
    },
    "required": ["location"],
    "additionalProperties": False,
}
TOOLS = {"get_weather": WEATHER, "now": None}


def details(violations: list[Any]) -> list[tuple[ViolationKind, str]]:
    return [(v.kind, v.detail) for v in violations]


def test_arguments_that_satisfy_the_schema_pass() -> None:
    checker = ToolChecker()
    good = tool_call('{"location": {"city": "Oslo", "unit": "c"}, "days": 2}')
    assert (
        checker.check(TOOLS, [good, tool_call("", name="now"), tool_call("{}", name="now")]) == []
    )


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (
            '{"location": {"city": "Oslo"}}',
            "$.location: 'required' — 'unit' is a required property",
        ),
        ('{"location": {"city": 7, "unit": "c"}}', "$.location.city: 'type' — 7 is not of type"),
        ('{"location": {"city": "Oslo", "unit": "k"}}', "$.location.unit: 'enum' — 'k' is not one"),
        (
            '{"location": {"city": "Oslo", "unit": "c"}, "colour": 1}',
            "$: 'additionalProperties' — Additional properties are not allowed ('colour'",
        ),
        ('{"location": {"city": "Oslo", "unit": "c"}, "days": 0}', "$.days: 'minimum'"),
        ("", "$: 'required' — 'location' is a required property"),
    ],
)
def test_schema_breaks_name_the_path_and_the_rule(arguments: str, expected: str) -> None:
    [violation] = ToolChecker().check(TOOLS, [tool_call(arguments)])
    assert violation.kind is ViolationKind.INVALID_TOOL_ARGUMENTS
    assert violation.call_id == "call_1"
    assert violation.detail.startswith(
        "The arguments of tool call 'get_weather' (call_1) do not match its declared schema: "
    )
    assert expected in violation.detail


def test_several_breaks_are_named_up_to_three() -> None:
    arguments = json.dumps({"location": {"city": 1, "unit": 2}, "days": "x", "a": 1, "days2": 0})
    [violation] = ToolChecker().check(TOOLS, [tool_call(arguments)])
    assert violation.detail.count("$") == 3
    assert violation.detail.endswith("(and 1 more).")


def test_undeclared_tool() -> None:
    checker = ToolChecker()
    [violation] = checker.check(TOOLS, [tool_call("{}", name="delete_all")])
    assert violation.kind is ViolationKind.UNDECLARED_TOOL
    assert "'delete_all' (call_1)" in violation.detail
    assert "it declared 'get_weather', 'now'" in violation.detail
    # A request that declared no tools at all: any call is undeclared.
    [none] = checker.check({}, [tool_call('{"location": 1}')])
    assert none.kind is ViolationKind.UNDECLARED_TOOL and "declared no tools" in none.detail
    many = {f"tool_{n:02}": None for n in range(25)}
    [listed] = checker.check(many, [tool_call("{}", name="x")])
    assert "'tool_09' and 15 more" in listed.detail


def test_unknown_declarations_judge_nothing() -> None:
    assert (
        ToolChecker().check(None, [tool_call("{}", name="anything"), tool_call('{"x": 1}')]) == []
    )


def test_names_are_exact() -> None:
    [violation] = ToolChecker().check(TOOLS, [tool_call("{}", name="Get_Weather")])
    assert violation.kind is ViolationKind.UNDECLARED_TOOL


def test_other_items_and_unnamed_calls_are_ignored() -> None:
    text = Item(ItemKind.ASSISTANT_TEXT, role="assistant", text="hi", tool_name="x")
    assert (
        ToolChecker().check({}, [text, tool_call("{}", name=None), tool_call("{}", name="")]) == []
    )


def test_unparseable_arguments_are_left_to_output_checks() -> None:
    broken = ['{"location": ', "[1, 2]", "null", "nan"]
    assert ToolChecker().check(TOOLS, [tool_call(a) for a in broken]) == []
    assert all(arguments_problem(a) is not None for a in broken[:3])


def test_cut_calls_are_not_validated_but_their_names_are() -> None:
    checker = ToolChecker()
    half = tool_call('{"location": {"ci', incomplete=True)
    assert checker.check(TOOLS, [half]) == []
    first, other = tool_call('{"location": {}}'), tool_call('{"location": {}}', choice=1)
    found = checker.check(TOOLS, [first, other], truncated=True)
    assert [v.kind for v in found] == [ViolationKind.INVALID_TOOL_ARGUMENTS]  # choice 1 only
    [named] = checker.check(TOOLS, [tool_call('{"x', name="rm", incomplete=True)], truncated=True)
    assert named.kind is ViolationKind.UNDECLARED_TOOL


def test_each_distinct_schema_is_compiled_once() -> None:
    checker = ToolChecker(cache_size=2)
    same_reordered = json.loads(json.dumps(WEATHER, sort_keys=True))
    first = checker.compiled(WEATHER)
    assert checker.compiled(same_reordered) is first
    checker.compiled({"type": "object"})
    checker.compiled({"type": "array"})
    assert checker.compiled(WEATHER) is not first  # evicted, least recently used


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "objekt"},
        {"type": "object", "properties": {"a": {"pattern": "(["}}},
        {"$schema": 123},
        {"required": "city"},
        ["not", "a", "schema"],
    ],
)
def test_an_invalid_schema_is_logged_once_and_never_raises(
    schema: Any, caplog: pytest.LogCaptureFixture
) -> None:
    checker = ToolChecker()
    tools = {"t": schema}
    with caplog.at_level(logging.WARNING, logger="gateway.checks.tools"):
        for _ in range(3):
            assert checker.check(tools, [tool_call('{"a": "x"}', name="t")]) == []
    assert len(caplog.records) == 1
    assert "not checked" in caplog.records[0].getMessage()


def test_remote_refs_are_never_fetched(caplog: pytest.LogCaptureFixture) -> None:
    tools = {"t": {"$ref": "https://schemas.invalid/weather.json"}}
    checker = ToolChecker()
    with caplog.at_level(logging.WARNING, logger="gateway.checks.tools"):
        for _ in range(2):
            assert checker.check(tools, [tool_call("{}", name="t")]) == []
    assert len(caplog.records) == 1


def test_local_refs_and_older_drafts_work() -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "definitions": {"unit": {"enum": ["c", "f"]}},
        "type": "object",
        "properties": {"unit": {"$ref": "#/definitions/unit"}},
    }
    [violation] = ToolChecker().check({"t": schema}, [tool_call('{"unit": "k"}', name="t")])
    assert "$.unit: 'enum'" in violation.detail
    assert ToolChecker().check({"t": True}, [tool_call('{"x": 1}', name="t")]) == []
    [never] = ToolChecker().check({"t": False}, [tool_call("{}", name="t")])
    assert "$: 'false' — False schema does not allow {}" in never.detail


def test_deep_and_huge_inputs_never_raise(caplog: pytest.LogCaptureFixture) -> None:
    checker = ToolChecker()
    deep_arguments = '{"a": ' + "[" * 50_000 + "]" * 50_000 + "}"
    assert arguments_problem(deep_arguments) == "JSON nested too deeply to read"
    assert checker.check(TOOLS, [tool_call(deep_arguments)]) == []
    huge = json.dumps({"location": {"city": "x" * MAX_ARGUMENT_CHARS, "unit": "k"}})
    assert checker.check(TOOLS, [tool_call(huge)]) == []
    deep_schema: dict[str, Any] = {}
    node = deep_schema
    for _ in range(5_000):
        node["items"] = {}
        node = node["items"]
    assert checker.check({"t": deep_schema}, [tool_call("[]", name="t")]) == []
    big_schema = {"enum": ["x" * 1000] * 1000}
    assert checker.check({"t": big_schema}, [tool_call("{}", name="t")]) == []
    # A recursive schema over deeply nested (but parseable) arguments.
    recursive = {
        "type": "object",
        "properties": {"n": {"$ref": "#/$defs/n"}},
        "$defs": {"n": {"type": "array", "items": {"$ref": "#/$defs/n"}}},
    }
    nested = '{"n": ' + "[" * 900 + "]" * 900 + "}"
    with caplog.at_level(logging.WARNING, logger="gateway.checks.tools"):
        assert checker.check({"t": recursive}, [tool_call(nested, name="t")]) == []


def test_long_messages_are_cut() -> None:
    schema = {"type": "object", "properties": {"u": {"enum": [f"unit_{n}" for n in range(500)]}}}
    [violation] = ToolChecker().check({"t": schema}, [tool_call('{"u": "k"}', name="t")])
    assert len(violation.detail) < 400 and "…" in violation.detail
