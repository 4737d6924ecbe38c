"""A step's record is deeply frozen and built once; its shape is declared in one table."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from gateway.config import RedactionSettings
from gateway.items import Item, ItemKind, Usage
from gateway.redaction.redactor import Redactor
from gateway.step import (
    NOT_SPOOLED,
    REFUSAL_FIELDS,
    STEP_FIELDS,
    RefusalRecord,
    StepRecord,
    StepStart,
)
from tests.factories import build_step

TOOLS = [{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}]


def test_every_field_of_a_step_is_declared_once() -> None:
    declared = [f.name for f in STEP_FIELDS]
    assert len(declared) == len(set(declared))
    assert set(declared) | NOT_SPOOLED == {f.name for f in dataclasses.fields(StepRecord)}
    assert not set(declared) & NOT_SPOOLED
    refusal = [f.name for f in REFUSAL_FIELDS]
    assert refusal == [f.name for f in dataclasses.fields(RefusalRecord)]


def test_a_record_cannot_be_changed_after_it_is_built() -> None:
    step = build_step()  # given lists: kept as tuples
    assert isinstance(step.input_items, tuple) and isinstance(step.output_items, tuple)
    assert isinstance(step.violations, tuple)
    with pytest.raises(dataclasses.FrozenInstanceError):
        step.usage.prompt_tokens = 1  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        step.provider_request_id = "req_1"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        step.output_items.append(Item(ItemKind.OTHER))  # type: ignore[attr-defined]


def _json_values_are_read_only(step: StepRecord) -> None:
    """What a sink could try on the record it is handed: every attempt is refused."""
    for item in (*step.input_items, *step.output_items):
        with pytest.raises(TypeError):
            item.attrs["seen_by"] = "a sink"  # type: ignore[index]
    assert step.params is not None and step.error is not None
    with pytest.raises(TypeError):
        step.params["temperature"] = 2.0  # type: ignore[index]
    with pytest.raises(TypeError):
        del step.error["message"]  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        step.declared_tools.append({"type": "web_search"})  # type: ignore[union-attr]
    with pytest.raises(TypeError):
        step.declared_tools[0] = {}  # type: ignore[index]


def test_attrs_parameters_tools_and_error_cannot_be_changed_by_a_later_stage() -> None:
    given_params = {"temperature": 0.2, "tool_choice": "auto"}
    step = build_step(declared_tools=TOOLS, params=given_params, error={"message": "m"})
    _json_values_are_read_only(step)
    assert step.params == given_params and list(step.declared_tools or ()) == TOOLS
    assert Item(ItemKind.OTHER).attrs == {}  # no attrs: a shared read-only empty mapping
    with pytest.raises(TypeError):
        Item(ItemKind.OTHER).attrs["x"] = 1  # type: ignore[index]


def test_a_redacted_copy_is_read_only_too_and_leaves_the_original_as_built() -> None:
    step = build_step(
        declared_tools=TOOLS, params={"user": "a@b.example"}, error={"message": "a@b.example"}
    )
    redacted = Redactor(RedactionSettings()).redact_step(step)
    _json_values_are_read_only(redacted)
    assert redacted.params == {"user": "[REDACTED:email]"}
    assert redacted.error == {"message": "[REDACTED:email]"}
    assert step.params == {"user": "a@b.example"} and step.error == {"message": "a@b.example"}
    assert list(redacted.declared_tools or ()) == TOOLS
    unredacted = Redactor(RedactionSettings(enabled=False)).redact_step(step)
    _json_values_are_read_only(unredacted)
    assert unredacted == step


def test_a_steps_start_is_as_read_only_as_its_record() -> None:
    start = StepStart(
        "step-1",
        "trace-1",
        "chat",
        "POST",
        "/v1/chat/completions",
        datetime(2025, 1, 1, tzinfo=UTC),
        input_items=[Item(ItemKind.USER, text="hi")],
        tools={"search": {"type": "object"}},
        declared_tools=TOOLS,
        params={"temperature": 0.2},
    )
    assert isinstance(start.input_items, tuple) and isinstance(start.declared_tools, tuple)
    assert start.tools == {"search": {"type": "object"}} and start.params == {"temperature": 0.2}
    for mapping in (start.tools, start.params):
        with pytest.raises(TypeError):
            mapping["changed"] = True  # type: ignore[index]


def test_a_step_ends_when_its_response_ended() -> None:
    step = build_step(latency_ms=1500.0)
    assert step.ended_at == step.started_at + timedelta(milliseconds=1500)
    unknown = build_step(latency_ms=None)
    assert unknown.ended_at == unknown.started_at
    given = step.started_at + timedelta(seconds=9)
    assert build_step(ended_at=given).ended_at == given


def test_usage_reports_merge_into_a_new_value() -> None:
    first = Usage(prompt_tokens=10, cached_tokens=4)
    merged = first.merged(Usage(prompt_tokens=12, completion_tokens=3))
    assert merged == Usage(prompt_tokens=12, completion_tokens=3, cached_tokens=4)
    assert first == Usage(prompt_tokens=10, cached_tokens=4)
