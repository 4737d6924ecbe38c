"""Records as the gateway builds them (steps, refusals), for tests that write, read or
export them directly."""

from __future__ import annotations

import itertools
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from gateway.items import Item, ItemKind, StopReason, Usage, Violation, ViolationKind
from gateway.step import RefusalRecord, StepRecord

_counter = itertools.count(1)
T0 = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)


def build_step(
    trace_id: str = "trace-1",
    *,
    step_id: str | None = None,
    at: datetime | None = None,
    items: int = 2,
    model: str | None = "gpt-4o",
    **fields: Any,
) -> StepRecord:
    """A realistic step: a user turn in, an assistant text and a tool call out."""
    n = next(_counter)
    inputs = [
        Item(ItemKind.USER, role="user", text=f"question {n}.{i}", attrs={"i": i})
        for i in range(items)
    ]
    outputs = [
        Item(ItemKind.ASSISTANT_TEXT, role="assistant", text=f"answer {n}"),
        Item(
            ItemKind.TOOL_CALL,
            role="assistant",
            call_id=f"call_{n}",
            tool_name="search",
            arguments='{"q": "x"}',
        ),
    ]
    values: dict[str, Any] = {
        "id": step_id or f"step-{uuid.uuid4().hex}",
        "trace_id": trace_id,
        "protocol": "chat",
        "method": "POST",
        "path": "/v1/chat/completions",
        "started_at": at or T0 + timedelta(seconds=n),
        "model": model,
        "stream": True,
        "http_status": 200,
        "stop_reason": StopReason.TOOL_CALLS,
        "raw_stop_reason": "tool_calls",
        "usage": Usage(prompt_tokens=10, completion_tokens=5, total_tokens=15, cached_tokens=2),
        "latency_ms": 120.5,
        "ttft_ms": 40.0,
        "input_items": inputs,
        "output_items": outputs,
    }
    values.update(fields)
    return StepRecord(**values)


def bare_step(trace_id: str = "tr_1", *, step_id: str = "st_1", **fields: Any) -> StepRecord:
    """A step with only the fields every record has (no items, no usage): for tests that set
    just the fields they check."""
    values: dict[str, Any] = {
        "id": step_id,
        "trace_id": trace_id,
        "protocol": "chat",
        "method": "POST",
        "path": "/v1/chat/completions",
        "started_at": T0,
    }
    values.update(fields)
    return StepRecord(**values)


def refusal(
    trace_id: str = "tr_1",
    at: datetime = T0,
    *,
    violations: list[Violation] | None = None,
    **fields: Any,
) -> RefusalRecord:
    """A request refused before the provider; by default a pairing refusal of a tool result
    that answers no call."""
    if violations is None:
        violations = [
            Violation(ViolationKind.ORPHAN_TOOL_RESULT, "no call", call_id="c", enforced=True)
        ]
    return RefusalRecord(trace_id=trace_id, created_at=at, violations=violations, **fields)
