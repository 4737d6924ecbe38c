"""The OpenTelemetry attributes of an MCP tool execution, as the GenAI and MCP semantic
conventions name them: added to the `execute_tool` span of the model call it ran, or on a
`tools/call {name}` span of its own when it joined none."""

from __future__ import annotations

from gateway import jsoncodec
from gateway.mcp.records import Execution

AttributeValue = str | bool | int | float | list[str]


def attributes(execution: Execution) -> dict[str, AttributeValue]:
    found: dict[str, AttributeValue] = {
        "mcp.method.name": "tools/call",
        "loopwatch.mcp.server": execution.server,
        "loopwatch.mcp.outcome": execution.outcome or "rpc_error",
    }
    if execution.protocol_version:
        found["mcp.protocol.version"] = execution.protocol_version
    if execution.session_id:  # protocols before 2026-07-28 have sessions
        found["mcp.session.id"] = execution.session_id
    if execution.rpc_id is not None:
        rpc_id = execution.rpc_id
        found["jsonrpc.request.id"] = (
            rpc_id if isinstance(rpc_id, str) else jsoncodec.dumps_text(rpc_id)
        )
    if execution.is_error:
        found["error.type"] = "tool_error"
    if execution.delivery:
        found["loopwatch.mcp.delivery"] = execution.delivery
    return found


def own_span_attributes(execution: Execution) -> dict[str, AttributeValue]:
    """An execution no model call is known for: the tool is named, the call id is not."""
    found = attributes(execution)
    found["gen_ai.operation.name"] = "execute_tool"
    found["gen_ai.tool.name"] = execution.tool
    found["loopwatch.mcp.join"] = execution.join
    if execution.trace_id:
        found["gen_ai.conversation.id"] = execution.trace_id
    return found
