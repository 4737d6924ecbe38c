"""The server's tools as a model reads them (name, description, input schema), and the check
of a call's arguments against its schema: the small subset of JSON Schema the schemas use."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from gateway.items import ViolationKind
from gateway.mcp.checks import KINDS as MCP_KINDS
from gateway.runs.status import TraceStatus

STATUSES = [status.value for status in TraceStatus]
VIOLATION_KINDS = sorted({*ViolationKind.__members__.values(), *MCP_KINDS})
MAX_LIST = 50


class BadArguments(ValueError):
    """A call's arguments do not meet its tool's input schema."""


_TRACE_ID = {"type": "string", "minLength": 1, "description": "The run's trace id (tr_...)."}
_LIMIT = {"type": "integer", "minimum": 1, "maximum": MAX_LIST, "default": 10}
_TIME = {"type": "string", "format": "date-time"}


def _schema(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    schema = {"type": "object", "properties": properties, "additionalProperties": False}
    return schema | {"required": list(required)} if required else schema


TOOLS: list[dict[str, Any]] = [
    {
        "name": "list_traces",
        "description": "List recorded agent runs (traces), newest activity first: id, status "
        "(running, completed, failed, refused, budget_exceeded, abandoned), steps, models, "
        "cost, violation count and the first user message. Filter to find a run.",
        "inputSchema": _schema(
            {
                "status": {"type": "string", "enum": STATUSES},
                "violation": {
                    "type": "string",
                    "enum": VIOLATION_KINDS,
                    "description": "Only runs with a violation of this kind.",
                },
                "model": {"type": "string", "description": "Part of a model name."},
                "since": _TIME | {"description": "Last activity at or after (RFC 3339)."},
                "until": _TIME | {"description": "Last activity at or before (RFC 3339)."},
                "search": {"type": "string", "description": "Words of recorded text or ids."},
                "include_children": {
                    "type": "boolean",
                    "description": "List sub-agents' runs too (default: top-level runs).",
                },
                "limit": _LIMIT,
            }
        ),
    },
    {
        "name": "get_trace",
        "description": "One run's steps condensed: per step the model, stop reason, text, "
        "tool calls with arguments and results (truncated), violations, tokens and cost. "
        "Long runs keep their last steps; `from_step` reads earlier ones.",
        "inputSchema": _schema(
            {
                "trace_id": _TRACE_ID,
                "from_step": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "First step number to show (default: as many of the "
                    "last steps as fit).",
                },
                "max_chars": {"type": "integer", "minimum": 1000, "maximum": 100000},
            },
            ("trace_id",),
        ),
    },
    {
        "name": "search",
        "description": "Find runs whose recorded text, tool names, or trace, step, response or "
        "call ids contain the given words or id prefix; sub-agents' runs included.",
        "inputSchema": _schema(
            {"query": {"type": "string", "minLength": 1}, "limit": _LIMIT}, ("query",)
        ),
    },
    {
        "name": "list_violations",
        "description": "Rule violations the gateway found in agent loops, newest first "
        "(unanswered tool calls, orphan results, loops, bad tool arguments, MCP rules...): "
        "kind, run, step, call id and detail. With trace_id: only that run's.",
        "inputSchema": _schema(
            {
                "kind": {"type": "string", "enum": VIOLATION_KINDS},
                "trace_id": _TRACE_ID,
                "limit": _LIMIT,
            }
        ),
    },
    {
        "name": "explain_run",
        "description": "One sentence on how a run ended and what went wrong where (step "
        "numbers, call ids), from its status, violations and last steps. Without trace_id: "
        "the most recent run.",
        "inputSchema": _schema({"trace_id": _TRACE_ID}),
    },
]
BY_NAME = {tool["name"]: tool for tool in TOOLS}

_TYPES: dict[str, type | tuple[type, ...]] = {"string": str, "integer": int, "boolean": bool}


def checked(name: str, arguments: Any) -> dict[str, Any]:
    """The arguments with defaults filled in; BadArguments naming the first fault."""
    schema = BY_NAME[name]["inputSchema"]
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise BadArguments("arguments must be an object")
    for key in schema.get("required", []):
        if key not in arguments:
            raise BadArguments(f"missing required argument {key!r}")
    result: dict[str, Any] = {}
    for key, value in arguments.items():
        rule = schema["properties"].get(key)
        if rule is None:
            raise BadArguments(f"unknown argument {key!r}")
        result[key] = _value(key, value, rule)
    for key, rule in schema["properties"].items():
        if key not in result and "default" in rule:
            result[key] = rule["default"]
    return result


def _value(key: str, value: Any, rule: dict[str, Any]) -> Any:
    wanted = rule["type"]
    is_bool = isinstance(value, bool)
    if not isinstance(value, _TYPES[wanted]) or (is_bool and wanted != "boolean"):
        raise BadArguments(f"{key!r} must be a {wanted}")
    if "enum" in rule and value not in rule["enum"]:
        raise BadArguments(f"{key!r} must be one of: {', '.join(rule['enum'])}")
    if "minimum" in rule and value < rule["minimum"]:
        raise BadArguments(f"{key!r} must be at least {rule['minimum']}")
    if "maximum" in rule and value > rule["maximum"]:
        raise BadArguments(f"{key!r} must be at most {rule['maximum']}")
    if "minLength" in rule and len(str(value).strip()) < rule["minLength"]:
        raise BadArguments(f"{key!r} must not be empty")
    if rule.get("format") == "date-time":
        return _time(key, str(value))
    return value


def _time(key: str, raw: str) -> datetime:
    try:
        when = datetime.fromisoformat(raw.strip())
    except ValueError:
        raise BadArguments(f"{key!r} must be an RFC 3339 time") from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)
