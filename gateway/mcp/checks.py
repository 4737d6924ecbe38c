"""The rules of an MCP tool call: declared by the server, arguments against `inputSchema`,
`structuredContent` against `outputSchema`, and what changed between two `tools/list`."""

from __future__ import annotations

from typing import Any

from gateway import jsoncodec
from gateway.checks.tools import ToolChecker
from gateway.mcp.texts import canonical_value

UNREQUESTED = "unrequested_tool_execution"
INVALID_ARGUMENTS = "invalid_tool_arguments"
INVALID_OUTPUT = "invalid_tool_output"
UNDECLARED = "undeclared_tool"
LIST_CHANGED = "tool_list_changed"
KINDS = (UNREQUESTED, INVALID_ARGUMENTS, INVALID_OUTPUT, UNDECLARED, LIST_CHANGED)


def unrequested(tool: str) -> tuple[str, str]:
    return UNREQUESTED, f"No model tool call asked for MCP tool {tool!r} with these arguments."


def unasked(tool: str, call_id: str | None, join: str) -> tuple[str, str] | None:
    """The one judgment of `unrequested_tool_execution`, observed or enforced, hint or no
    hint, made once the call was joined: it names no model call (not joined by content, nor
    named by the client's `_meta`) and is not `ambiguous`. So no recent model call not yet
    run, of its run when the client named one, else of any run, has its tool and arguments.
    Several of different runs do (`ambiguous`): a model asked for it, which one is never
    guessed."""
    if call_id is not None or join == "ambiguous":
        return None
    return unrequested(tool)


def tools_by_name(tools: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in tools if isinstance(t, dict) and isinstance(t.get("name"), str)}


def call_problems(
    checker: ToolChecker, tools: dict[str, dict[str, Any]] | None, tool: str, arguments: Any
) -> list[tuple[str, str]]:
    """(kind, detail) of a call before it runs; `tools` None: the server's list is unknown."""
    if tools is None:
        return []
    declared = tools.get(tool)
    if declared is None:
        names = ", ".join(sorted(tools)[:20]) or "none"
        return [(UNDECLARED, f"Tool {tool!r} is not in the server's tools/list ({names}).")]
    schema = declared.get("inputSchema")
    if not isinstance(schema, dict | bool):
        return []
    problem = _breaks(checker, schema, arguments or {})
    if problem is None:
        return []
    return [(INVALID_ARGUMENTS, f"The arguments of MCP tool {tool!r} {problem}.")]


def output_problem(
    checker: ToolChecker, tools: dict[str, dict[str, Any]] | None, tool: str, result: Any
) -> tuple[str, str] | None:
    """`structuredContent` against the tool's `outputSchema`, when both are there."""
    if tools is None or tool not in tools or not isinstance(result, dict):
        return None
    schema = tools[tool].get("outputSchema")
    if not isinstance(schema, dict) or result.get("isError"):
        return None
    if "structuredContent" not in result:
        detail = f"MCP tool {tool!r} declares an outputSchema but returned no structuredContent."
        return (INVALID_OUTPUT, detail)
    problem = _breaks(checker, schema, result["structuredContent"])
    if problem is None:
        return None
    return (INVALID_OUTPUT, f"The structuredContent of MCP tool {tool!r} {problem}.")


def _breaks(checker: ToolChecker, schema: dict[str, Any] | bool, instance: Any) -> str | None:
    """How `instance` breaks `schema`, or None; the common case (valid) asks the compiled
    validator directly, without serializing the instance for the detailed report."""
    is_valid = getattr(checker.compiled(schema), "is_valid", None)
    try:
        if is_valid is not None and is_valid(instance):
            return None
    except Exception:  # a schema the validator cannot apply: the report below says so
        pass
    return checker.arguments_error(schema, jsoncodec.dumps_text(instance))


def list_changes(
    before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]]
) -> list[tuple[str, str]]:
    """(tool, what changed) between two lists of one server, in name order."""
    changes = []
    for name in sorted(before.keys() | after.keys()):
        if name not in before:
            changes.append((name, "added"))
        elif name not in after:
            changes.append((name, "removed"))
        else:
            changed = [
                label
                for key, label in (
                    ("description", "description"),
                    ("inputSchema", "inputSchema"),
                    ("outputSchema", "outputSchema"),
                    ("annotations", "annotations"),
                )
                if canonical_value(before[name].get(key)) != canonical_value(after[name].get(key))
            ]
            if changed:
                changes.append((name, " and ".join(changed) + " changed"))
    return changes
