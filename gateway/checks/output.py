"""Rules over one step's assembled output: truncated or malformed tool calls, stop reasons.

Sans-IO; the assembler runs these when it builds its result.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import orjson

from gateway.items import Item, ItemKind, StopReason, Violation, ViolationKind, provider_run

if TYPE_CHECKING:
    from gateway.stream.assembler import Assembled


def check_output(assembled: Assembled) -> list[Violation]:
    calls = [item for item in assembled.output_items if item.kind is ItemKind.TOOL_CALL]
    # The step's stop reason is its first choice's; other choices (n > 1) are not judged by
    # it, nor are calls the provider ran itself (they end with any stop).
    first_choice = [
        call for call in calls if not call.attrs.get("choice") and not provider_run(call)
    ]
    violations: list[Violation] = []
    truncated = assembled.stop_reason is StopReason.LENGTH
    for call in calls:
        if truncated and call in first_choice:
            violations.append(_truncated(call))
        elif not call.attrs.get("incomplete") and not call.attrs.get("free_form"):
            # Free-form input (Responses custom tools) is text by design, never JSON.
            problem = arguments_problem(call.arguments)
            if problem is not None:
                violations.append(
                    Violation(
                        ViolationKind.INVALID_TOOL_ARGUMENTS,
                        f"The arguments of tool call {call_label(call)} are {problem}.",
                        call_id=call.call_id,
                    )
                )
    mismatch = _stop_reason_mismatch(assembled, len(first_choice))
    if mismatch is not None:
        violations.append(mismatch)
    return violations


def arguments_problem(arguments: str | None) -> str | None:
    """Why tool-call arguments are unusable, or None when they parse as a JSON object."""
    # An empty string is what providers send for a tool without parameters: same as "{}".
    if arguments is None or not arguments.strip():
        return None
    try:
        # orjson reads a subset of what the standard library reads, to the same values;
        # the standard library decides the rest, and words the errors.
        return _shape_problem(orjson.loads(arguments))
    except orjson.JSONDecodeError:
        return _standard_problem(arguments)


def _standard_problem(arguments: str) -> str | None:
    try:
        value = json.loads(arguments)
    except json.JSONDecodeError as exc:
        return f"not valid JSON ({exc.msg} at character {exc.pos})"
    except RecursionError:  # a hostile provider's arguments: flagged, never a lost step
        return "JSON nested too deeply to read"
    return _shape_problem(value)


def _shape_problem(value: object) -> str | None:
    if not isinstance(value, dict):
        return f"valid JSON but not an object (a {type(value).__name__})"
    return None


def _truncated(call: Item) -> Violation:
    return Violation(
        ViolationKind.TRUNCATED_TOOL_CALL,
        f"Tool call {call_label(call)} was cut off because the model hit its output token "
        "limit (finish reason length); its arguments are likely incomplete.",
        call_id=call.call_id,
    )


def _stop_reason_mismatch(assembled: Assembled, call_count: int) -> Violation | None:
    raw = assembled.raw_stop_reason
    if assembled.stop_reason is StopReason.TOOL_CALLS and call_count == 0:
        return Violation(
            ViolationKind.STOP_REASON_MISMATCH,
            f"The provider reported finish reason {raw!r} (tool calls) but the response "
            "contains no tool call.",
        )
    if assembled.stop_reason is StopReason.COMPLETED and call_count:
        return Violation(
            ViolationKind.STOP_REASON_MISMATCH,
            f"The response contains {call_count} tool call(s) but the provider reported "
            f"finish reason {raw!r} instead of a tool-call stop; clients that trust the "
            "finish reason will not run them.",
        )
    return None


def call_label(call: Item) -> str:
    """A tool call as details name it: `'get_weather' (call_1)`."""
    ident = call.call_id or call.attrs.get("internal_id") or "without id"
    return f"{call.tool_name or '(unnamed)'!r} ({ident})"
