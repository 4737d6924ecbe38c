"""Read-API JSON as the store will give it, fields of the second release included when asked
for: for the viewer's presenter, which must work with and without them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

T_JSON = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)


def iso_at(ms: float) -> str:
    return (T_JSON + timedelta(milliseconds=ms)).isoformat().replace("+00:00", "Z")


def item_dict(kind: str, **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "kind": kind,
        "role": None,
        "text": None,
        "call_id": None,
        "tool_name": None,
        "arguments": None,
        "is_error": None,
        "attrs": {},
    }
    return {**base, **fields}


def step_dict(
    seq: int,
    *,
    at_ms: float,
    latency_ms: float = 1000.0,
    stop: str = "tool_calls",
    inputs: list[dict[str, Any]] | None = None,
    outputs: list[dict[str, Any]] | None = None,
    **fields: Any,
) -> dict[str, Any]:
    step: dict[str, Any] = {
        "id": f"st-{seq}",
        "seq": seq,
        "protocol": "chat",
        "model": "gpt-4o",
        "stream": True,
        "http_status": 200,
        "stop_reason": stop,
        "raw_stop_reason": stop,
        "usage": {
            "prompt_tokens": 100,
            "completion_tokens": 20,
            "total_tokens": 120,
            "cached_tokens": 0,
            "reasoning_tokens": 0,
        },
        "provider_request_id": f"req_{seq}",
        "response_id": f"resp_{seq}",
        "started_at": iso_at(at_ms),
        "latency_ms": latency_ms,
        "ttft_ms": latency_ms / 4,
        "input_items": inputs or [],
        "output_items": outputs or [],
        "error": None,
    }
    return {**step, **fields}


def trace_dict(
    steps: list[dict[str, Any]], violations: list[dict[str, Any]] | None = None, **fields: Any
) -> dict[str, Any]:
    ends = [
        datetime.fromisoformat(s["started_at"]) + timedelta(milliseconds=s["latency_ms"] or 0)
        for s in steps
    ]
    trace: dict[str, Any] = {
        "id": "tr-json",
        "started_at": steps[0]["started_at"] if steps else iso_at(0),
        "updated_at": max(ends).isoformat().replace("+00:00", "Z") if ends else iso_at(0),
        "status": "ok",
        "step_count": len(steps),
        "models": ["gpt-4o"],
        "usage": {
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "total_tokens": 0,
            "cached_tokens": 0,
            "reasoning_tokens": 0,
        },
        "violation_count": len(violations or []),
        "budget": {"max_steps": None, "max_tokens": None},
        "steps": steps,
        "violations": violations or [],
    }
    return {**trace, **fields}


def violation_dict(
    kind: str, *, step_id: str | None, at_ms: float, **fields: Any
) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": f"v-{kind}-{at_ms:.0f}",
        "kind": kind,
        "trace_id": "tr-json",
        "step_id": step_id,
        "call_id": None,
        "detail": f"{kind} happened",
        "enforced": step_id is None,
        "created_at": iso_at(at_ms),
    }
    return {**base, **fields}
