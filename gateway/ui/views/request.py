"""What a step's request declared and asked for, as the step shows it: its parameters, its
tools (name, kind, description, schema, whatever the protocol's shape) and the raw record.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

RESPONSE_FIELDS = (
    "http_status",
    "stop_reason",
    "raw_stop_reason",
    "response_id",
    "usage",
    "output_items",
    "error",
    "attrs",
)


@dataclass(frozen=True, slots=True)
class ToolView:
    name: str
    kind: str  # function, custom, or a hosted tool's type
    description: str | None
    schema: str | None  # pretty JSON of its arguments' schema (or a custom tool's format)


@dataclass(slots=True)
class RequestView:
    recorded: bool  # False: a step stored before tools and parameters were recorded
    params: list[tuple[str, str]] = field(default_factory=list)
    tools: list[ToolView] = field(default_factory=list)
    raw_request: str = ""
    raw_response: str = ""


def request_view(step: dict[str, Any]) -> RequestView:
    params, tools = step.get("params"), step.get("tools")
    return RequestView(
        recorded=params is not None or tools is not None,
        params=[(key, _value(value)) for key, value in (params or {}).items()],
        tools=[_tool(tool) for tool in tools or []],
        raw_request=_pretty(_raw_request(step)),
        raw_response=_pretty({name: step.get(name) for name in RESPONSE_FIELDS}),
    )


def _raw_request(step: dict[str, Any]) -> dict[str, Any]:
    return {
        "model": step.get("model"),
        "params": step.get("params"),
        "tools": step.get("tools"),
        "input_items": step.get("input_items") or [],
    }


def _tool(tool: Any) -> ToolView:
    """Chat nests a tool under its type (`function`, `custom`); Responses and Anthropic
    keep it flat; a hosted tool has only a type and its settings."""
    if not isinstance(tool, dict):
        return ToolView(name=_value(tool), kind="other", description=None, schema=None)
    kind = str(tool.get("type") or "function")
    nested = tool.get(kind)
    inner: dict[str, Any] = nested if isinstance(nested, dict) else tool
    schema = next(
        (inner[k] for k in ("parameters", "input_schema", "format") if inner.get(k) is not None),
        None,
    )
    description = inner.get("description")
    return ToolView(
        name=str(inner.get("name") or kind),
        kind=kind,
        description=description if isinstance(description, str) else None,
        schema=None if schema is None else _pretty(schema),
    )


def _value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)
