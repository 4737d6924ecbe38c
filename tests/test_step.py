"""A step's record is deeply frozen and built once; its shape is declared in one table."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from gateway.items import Item, ItemKind, Usage
from gateway.step import NOT_SPOOLED, REFUSAL_FIELDS, STEP_FIELDS, RefusalRecord, StepRecord
from tests.factories import build_step


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
