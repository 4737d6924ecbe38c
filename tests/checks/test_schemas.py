"""Compiled schemas: the fast validator is used only where it reads a schema as the reference
one does, so a verdict never depends on which of them ran; verdicts on repeated arguments."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gateway.checks.schemas import Compiled, compile_schema
from gateway.checks.tools import ToolChecker
from gateway.items import Item, ItemKind, ViolationKind

SCHEMAS: list[dict[str, Any]] = [
    {
        "type": "object",
        "properties": {
            "city": {"type": "string", "maxLength": 3},
            "days": {"type": "integer", "minimum": 1, "exclusiveMaximum": 15},
            "unit": {"enum": ["c", "f", None, 1]},
            "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
            "spot": {"anyOf": [{"type": "null"}, {"type": "object", "required": ["x"]}]},
        },
        "required": ["city"],
        "additionalProperties": False,
    },
    {"type": "object", "properties": {"n": {"type": ["integer", "null"]}}, "minProperties": 1},
    {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"a": {"const": 1}, "b": {"not": {"type": "string"}}},
        "if": {"required": ["a"]},
        "then": {"required": ["b"]},
    },
]
INSTANCES: list[Any] = [
    {"city": "Lyo"},
    {"city": "Lyon"},
    {"city": "😀😀😀"},
    {"city": "x", "days": 1.0},
    {"city": "x", "days": 15},
    {"city": "x", "days": True},
    {"city": "x", "unit": 1.0},
    {"city": "x", "unit": True},
    {"city": "x", "tags": ["a", "a"]},
    {"city": "x", "spot": {"y": 1}},
    {"city": "x", "other": 1},
    {"n": 2**70},
    {"n": 1.5},
    {},
    {"a": 1},
    {"a": 1, "b": 2},
    {"a": True, "b": "s"},
]


@pytest.mark.parametrize("schema", SCHEMAS)
def test_the_fast_validator_agrees_with_the_reference(schema: dict[str, Any]) -> None:
    compiled = compile_schema(schema)
    assert isinstance(compiled, Compiled) and compiled.fast is not None
    for instance in INSTANCES:
        assert compiled.is_valid(instance) == compiled.full.is_valid(instance), instance


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string", "pattern": "^[a-z]+\\Z"},  # regular expression dialects differ
        {"type": "number", "multipleOf": 0.01},  # exact decimals against float arithmetic
        {"type": "string", "format": "email"},
        {"$ref": "#/$defs/n", "$defs": {"n": {"type": "integer"}}},
        {"type": "object", "x-vendor": True},
    ],
)
def test_schemas_read_differently_are_left_to_the_reference(schema: dict[str, Any]) -> None:
    compiled = compile_schema(schema)
    assert isinstance(compiled, Compiled) and compiled.fast is None


def test_a_price_that_floats_cannot_divide_is_judged_as_before() -> None:
    checker = ToolChecker()
    tools = {"pay": {"type": "object", "properties": {"usd": {"multipleOf": 0.01}}}}
    [violation] = checker.check(tools, [_call('{"usd": 19.99}')])
    assert violation.kind is ViolationKind.INVALID_TOOL_ARGUMENTS
    assert "$.usd: 'multipleOf'" in violation.detail


def test_repeated_arguments_get_the_same_verdict() -> None:
    checker = ToolChecker(verdicts=2)
    schema = {"type": "object", "properties": {"days": {"type": "integer", "maximum": 3}}}
    tools = {"pay": schema}
    bad, good, other = '{"days": 9}', '{"days": 2}', '{"days": 8}'
    first = checker.check(tools, [_call(bad)])
    for arguments in (bad, good, other, bad, good):  # hits and evictions alike
        expected = first if arguments == bad else checker.check(tools, [_call(arguments)])
        assert checker.check(tools, [_call(arguments)]) == expected
    assert checker.check(tools, [_call(good)]) == []
    # The same arguments against another schema are judged against that one.
    assert checker.check({"pay": {"type": "object"}}, [_call(bad)]) == []
    assert json.loads(bad) == {"days": 9}


def _call(arguments: str) -> Item:
    return Item(ItemKind.TOOL_CALL, call_id="c1", tool_name="pay", arguments=arguments)
