"""A spooled record keeps what it was built with (a step's declared tools and parameters, a
refusal's items); a line spooled by an older or newer release still reads."""

from __future__ import annotations

from datetime import UTC, datetime

import orjson
import pytest

from gateway.items import Item, ItemKind, Violation, ViolationKind
from gateway.recording import codec as records
from gateway.step import RefusalRecord
from tests.factories import build_step

TOOLS = [{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}]


def test_tools_and_parameters_round_trip_through_the_spool() -> None:
    step = build_step(declared_tools=TOOLS, params={"temperature": 0.2, "tool_choice": "auto"})
    assert records.decode(records.encode(step)) == step


def test_a_decoded_record_is_as_read_only_as_the_one_spooled() -> None:
    step = build_step(
        declared_tools=TOOLS, params={"temperature": 0.2}, error={"message": "m", "code": 1}
    )
    decoded = records.decode(records.encode(step))
    assert isinstance(decoded, type(step))
    assert decoded == step and records.encode(decoded) == records.encode(step)
    assert isinstance(decoded.declared_tools, tuple)
    for mapping in (decoded.params, decoded.error, decoded.input_items[0].attrs):
        with pytest.raises(TypeError):
            mapping["changed"] = True  # type: ignore[index]


def test_a_line_spooled_before_tools_were_recorded_still_reads() -> None:
    step = build_step(declared_tools=TOOLS, params={"temperature": 0.2})
    line = records.encode(step)
    # The line as a release before tools and parameters wrote it: through `retry_of`.
    older = line[:1] + orjson.dumps(orjson.loads(line[1:])[:27]) + b"\n"
    decoded = records.decode(older)
    assert isinstance(decoded, type(step))
    assert decoded.declared_tools is None and decoded.params is None
    assert decoded.id == step.id and decoded.output_items == step.output_items


def test_a_line_in_the_oldest_format_still_reads() -> None:
    step = build_step(retry_of="step-0", tool_ms=250.0)
    line = records.encode(step)
    # A release before retries were recorded ended a step's line with its session id.
    oldest = line[:1] + orjson.dumps(orjson.loads(line[1:])[:26]) + b"\n"
    decoded = records.decode(oldest)
    assert isinstance(decoded, type(step))
    assert (decoded.retry_of, decoded.tool_ms, decoded.declared_tools) == (None, None, None)
    assert decoded.usage == step.usage and decoded.ended_at == step.ended_at


def test_a_line_from_a_newer_release_reads_what_this_one_knows() -> None:
    step = build_step(tool_ms=250.0)
    line = records.encode(step)
    newer = line[:1] + orjson.dumps([*orjson.loads(line[1:]), "a later field"]) + b"\n"
    assert records.decode(newer) == step


def test_a_refusal_round_trips_through_the_spool() -> None:
    refused = Violation(ViolationKind.MISSING_TOOL_RESULT, "no result", "call_1", enforced=True)
    refusal = RefusalRecord(
        "trace-r",
        datetime(2025, 1, 1, 12, tzinfo=UTC),
        [refused],
        budget_max_steps=5,
        items=[Item(ItemKind.USER, role="user", text="go on", attrs={"i": 0})],
        session_id="s-1",
    )
    decoded = records.decode(records.encode(refusal))
    assert decoded == refusal and isinstance(decoded.violations, tuple)
