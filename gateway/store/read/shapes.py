"""The read API's JSON shapes of stored rows (DESIGN.md, Read API): traces with their
status at a given time, steps, items, violations and refusals."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy.engine import RowMapping

from gateway.protocols.wire_shapes.keys import OPAQUE
from gateway.runs.status import DEFAULT_IDLE_SECONDS, StoredStatus, TraceStatus, status_at

USAGE_FIELDS = (
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "cached_tokens",
    "reasoning_tokens",
)


ITEM_FIELDS = ("kind", "role", "text", "call_id", "tool_name", "arguments", "is_error", "attrs")


def iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def nano_usd(nano: int | None) -> float | None:
    return None if nano is None else nano / 1e9


def ms_between(start: datetime | None, end: datetime | None) -> float | None:
    if start is None or end is None:
        return None
    return max(0.0, (end - start).total_seconds() * 1000.0)


def trace_status(
    row: RowMapping, now: datetime | None = None, idle_seconds: float = DEFAULT_IDLE_SECONDS
) -> TraceStatus:
    """Its status at `now` (default: the present): stored, and `running` while not idle."""
    try:
        status = TraceStatus(row["status"])
    except ValueError:  # a value no revision knows: show it as over
        status = TraceStatus.COMPLETED
    stored = StoredStatus(status, final=bool(row["status_final"]))
    return status_at(stored, row["updated_at"], now or datetime.now(UTC), idle_seconds)


def cost_usd(cost_nano: int | None, step_count: int | None) -> float | None:
    """Dollars of a trace or a group of them; None (unknown, never a guessed zero) when
    there are steps and none of them was priced. Every surface reads cost through here."""
    if (step_count or 0) > 0 and not cost_nano:
        return None
    return nano_usd(int(cost_nano or 0))


def trace_json(
    row: RowMapping, now: datetime | None = None, idle_seconds: float = DEFAULT_IDLE_SECONDS
) -> dict[str, Any]:
    """The one reading of a trace row: its status at `now`, cost and times, for the read
    API, the list, the trace page and the sessions page alike."""
    # No priced step and some steps: the cost is unknown, never a guessed zero.
    unknown_cost = row["step_count"] > 0 and row["cost_nano"] == 0
    return {
        "id": row["id"],
        "started_at": iso(row["started_at"]),
        "updated_at": iso(row["updated_at"]),
        "status": trace_status(row, now, idle_seconds).value,
        "step_count": row["step_count"],
        "models": list(row["models"] or []),
        "usage": {name: row[name] for name in USAGE_FIELDS},
        "violation_count": row["violation_count"],
        "has_violations": row["violation_count"] > 0,
        "budget": {"max_steps": row["budget_max_steps"], "max_tokens": row["budget_max_tokens"]},
        "cost_usd": cost_usd(row["cost_nano"], row["step_count"]),
        "cost_complete": row["unpriced_steps"] == 0 and not unknown_cost,
        "duration_ms": ms_between(row["started_at"], row["last_response_end"]),
        "model_ms": row["model_ms"],
        "tool_ms": row["tool_ms"],
        "session_id": row["session_id"],
        "first_user_text": row["first_user_text"],
        # A run made from another's record (revision 0020); null on any other.
        **{name: row[name] for name in RECORD_OF_FIELDS},
    }


RECORD_OF_FIELDS = ("replay_of", "diverged_at", "fork_of", "fork_at")


def violation_json(row: RowMapping) -> dict[str, Any]:
    result = {
        "id": row["id"],
        "kind": row["kind"],
        "trace_id": row["trace_id"],
        "step_id": row["step_id"],
        "call_id": row["call_id"],
        "detail": row["detail"],
        "enforced": row["enforced"],
        "created_at": iso(row["created_at"]),
    }
    if row["items"] is not None:
        result["items"] = row["items"]
    return result


def refusal_json(row: RowMapping) -> dict[str, Any]:
    """An enforced violation without a step: a request refused before the provider."""
    return {
        "id": row["id"],
        "created_at": iso(row["created_at"]),
        "kind": row["kind"],
        "call_id": row["call_id"],
        "detail": row["detail"],
        "enforced": row["enforced"],
        "items": row["items"] or [],
    }


# A step's usage adds the cache-write tokens, which only steps keep.
STEP_USAGE_FIELDS = (*USAGE_FIELDS, "cache_creation_tokens")


def step_json(row: RowMapping) -> dict[str, Any]:
    return {
        "id": row["id"],
        "seq": row["seq"],
        "protocol": row["protocol"],
        "method": row["method"],
        "path": row["path"],
        "model": row["model"],
        "stream": row["stream"],
        "http_status": row["http_status"],
        "stop_reason": row["stop_reason"],
        "raw_stop_reason": row["raw_stop_reason"],
        "usage": {name: row[name] for name in STEP_USAGE_FIELDS},
        "provider_request_id": row["provider_request_id"],
        "response_id": row["response_id"],
        "started_at": iso(row["started_at"]),
        "latency_ms": row["latency_ms"],
        "ttft_ms": row["ttft_ms"],
        "tool_ms": row["tool_ms"],
        "cost_usd": nano_usd(row["cost_nano"]),
        "cost_source": row["cost_source"],
        "retry_of": row.get("retry_of"),
        "input_items": [],
        "output_items": [],
        "error": row["error"],
        # The request's parameters and declared tools (None: not recorded); the tools are
        # filled in from their tool set by the reader.
        "params": row["params"],
        "tool_set": row["tool_set"],
        "tools": None,
        # Facts of the provider's side (gateway.exchange.closing.step_attrs); {}: none.
        "attrs": row.get("attrs") or {},
    }


def item_json(row: RowMapping) -> dict[str, Any]:
    return {name: row[name] for name in ITEM_FIELDS}


def without_opaque(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The steps with no opaque payload on their items (`keep_opaque_reasoning` keeps them
    for cassettes and forks alone): no view shows one."""
    for step in steps:
        for items in (step["input_items"], step["output_items"]):
            for item in items:
                attrs = item["attrs"]
                if attrs and OPAQUE in attrs:
                    item["attrs"] = {k: v for k, v in attrs.items() if k != OPAQUE}
    return steps


def mcp_violation_json(row: RowMapping) -> dict[str, Any]:
    return {
        "id": row["id"],
        "kind": row["kind"],
        "trace_id": row["trace_id"],
        "step_id": None,
        "call_id": row["call_id"],
        "detail": row["detail"],
        "enforced": row["enforced"],
        "created_at": iso(row["created_at"]),
        "source": "mcp",
        "server": row["server"],
        "tool": row["tool"],
        "execution_id": row["execution_id"],
    }
