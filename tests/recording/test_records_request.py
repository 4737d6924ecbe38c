"""A spooled step keeps its declared tools and parameters; a line spooled before they were
recorded still reads, with neither."""

from __future__ import annotations

import orjson

from gateway.recording import codec as records
from tests.factories import build_step

TOOLS = [{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}]


def test_tools_and_parameters_round_trip_through_the_spool() -> None:
    step = build_step(declared_tools=TOOLS, params={"temperature": 0.2, "tool_choice": "auto"})
    assert records.decode(records.encode(step)) == step


def test_a_line_spooled_before_tools_were_recorded_still_reads() -> None:
    step = build_step(declared_tools=TOOLS, params={"temperature": 0.2})
    line = records.encode(step)
    older = line[:1] + orjson.dumps(orjson.loads(line[1:])[:-2]) + b"\n"
    decoded = records.decode(older)
    assert isinstance(decoded, type(step))
    assert decoded.declared_tools is None and decoded.params is None
    assert decoded.id == step.id and decoded.output_items == step.output_items
