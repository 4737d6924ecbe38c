"""Builders of OpenAI Responses output items of tools the provider defines (web and file search,
code interpreter, image generation, remote MCP, programs, hosted shell, tool search), and the
stream events that carry them.

Shapes from the openai package's type definitions (openai 3.x, `openai/types/responses/`:
`response_output_item.py` for `mcp_*`, `image_generation_call`, `program`, `program_output`;
`response_function_web_search.py`, `response_file_search_tool_call.py`,
`response_code_interpreter_tool_call.py`, `response_function_shell_tool_call.py`,
`response_function_shell_tool_call_output.py`, `response_tool_search_call.py`,
`response_tool_search_output_item.py`; the `response_*_event.py` modules for the events)
and the tool guides at https://developers.openai.com/api/docs/guides/ (tools-web-search,
tools-connectors-mcp, tools-shell, tools-image-generation, tools-code-interpreter).
"""

from __future__ import annotations

import json
from typing import Any

# A 1x1 PNG: what `image_generation_call.result` holds (base64), never to be stored.
PNG_BASE64 = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9aw"
    "AAAABJRU5ErkJggg=="
)


def web_search_call(
    item_id: str, query: str, *urls: str, status: str = "completed"
) -> dict[str, Any]:
    action: dict[str, Any] = {"type": "search", "query": query, "queries": [query]}
    if urls:  # sent when the request includes `web_search_call.action.sources`
        action["sources"] = [{"type": "url", "url": url} for url in urls]
    return {"id": item_id, "type": "web_search_call", "status": status, "action": action}


def file_search_call(item_id: str, queries: list[str], *files: str) -> dict[str, Any]:
    results = [
        {"file_id": f"file-{n}", "filename": name, "score": 0.9, "text": f"({name} excerpt)"}
        for n, name in enumerate(files)
    ]
    return {
        "id": item_id,
        "type": "file_search_call",
        "status": "completed",
        "queries": queries,
        "results": results,
    }


def code_interpreter_call(item_id: str, code: str, logs: str) -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "code_interpreter_call",
        "status": "completed",
        "code": code,
        "container_id": "cntr_68c42d1d0878819d",
        "outputs": [{"type": "logs", "logs": logs}],
    }


def image_generation_call(item_id: str, prompt: str) -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "image_generation_call",
        "status": "completed",
        "result": PNG_BASE64,
        "revised_prompt": prompt,
        "output_format": "png",
        "size": "1024x1024",
        "quality": "high",
        "background": "opaque",
    }


def mcp_list_tools(item_id: str, server: str, *names: str) -> dict[str, Any]:
    tools = [
        {"name": name, "input_schema": {"type": "object", "properties": {}}, "annotations": None}
        for name in names
    ]
    return {"id": item_id, "type": "mcp_list_tools", "server_label": server, "tools": tools}


def mcp_call(
    item_id: str,
    name: str,
    server: str,
    arguments: dict[str, Any],
    *,
    output: str | None = None,
    error: str | None = None,
    approval_request_id: str | None = None,
) -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "mcp_call",
        "status": "failed" if error else "completed",
        "approval_request_id": approval_request_id,
        "arguments": json.dumps(arguments),
        "error": error,
        "name": name,
        "output": output,
        "server_label": server,
    }


def mcp_approval_request(
    item_id: str, name: str, server: str, arguments: dict[str, Any]
) -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "mcp_approval_request",
        "arguments": json.dumps(arguments),
        "name": name,
        "server_label": server,
    }


def mcp_approval_response(request_id: str, approve: bool) -> dict[str, Any]:
    """The client's answer (an input item)."""
    return {"type": "mcp_approval_response", "approval_request_id": request_id, "approve": approve}


def program(call_id: str, code: str) -> dict[str, Any]:
    return {
        "id": "prg_" + call_id.removeprefix("call_"),
        "type": "program",
        "call_id": call_id,
        "code": code,
        "fingerprint": "fp_opaque_1f2e3d4c5b6a",
    }


def program_output(call_id: str, result: str) -> dict[str, Any]:
    return {
        "id": "prgo_" + call_id.removeprefix("call_"),
        "type": "program_output",
        "call_id": call_id,
        "result": result,
        "status": "completed",
    }


def shell_call(call_id: str, *commands: str, container: str | None = None) -> dict[str, Any]:
    """A shell call: in a hosted container (`container_reference`) or the client's (`local`)."""
    environment = (
        {"type": "container_reference", "container_id": container}
        if container
        else {"type": "local"}
    )
    return {
        "id": "sh_" + call_id.removeprefix("call_"),
        "type": "shell_call",
        "status": "completed",
        "call_id": call_id,
        "action": {"commands": list(commands), "timeout_ms": 60000, "max_output_length": 4096},
        "environment": environment,
    }


def shell_call_output(call_id: str, stdout: str, exit_code: int = 0) -> dict[str, Any]:
    return {
        "id": "sho_" + call_id.removeprefix("call_"),
        "type": "shell_call_output",
        "status": "completed",
        "call_id": call_id,
        "output": [
            {"stdout": stdout, "stderr": "", "outcome": {"type": "exit", "exit_code": exit_code}}
        ],
    }


def tool_search_call(call_id: str, query: str, execution: str = "server") -> dict[str, Any]:
    return {
        "id": "tsc_" + call_id.removeprefix("call_"),
        "type": "tool_search_call",
        "status": "completed",
        "call_id": call_id,
        "execution": execution,
        "arguments": {"query": query},
    }


def tool_search_output(
    call_id: str, namespace: str, *names: str, execution: str = "server"
) -> dict[str, Any]:
    functions = [
        {"type": "function", "name": name, "parameters": {"type": "object"}, "strict": True}
        for name in names
    ]
    return {
        "id": "tso_" + call_id.removeprefix("call_"),
        "type": "tool_search_output",
        "status": "completed",
        "call_id": call_id,
        "execution": execution,
        "tools": [{"type": "namespace", "name": namespace, "description": "", "tools": functions}],
    }


# --- stream events -----------------------------------------------------------------------

# Intermediate events of a hosted tool's item, between its `output_item.added` and `.done`.
_PROGRESS = {
    "web_search_call": ("web_search_call", ["in_progress", "searching", "completed"]),
    "file_search_call": ("file_search_call", ["in_progress", "searching", "completed"]),
    "code_interpreter_call": (
        "code_interpreter_call",
        ["in_progress", "interpreting", "completed"],
    ),
    "image_generation_call": ("image_generation_call", ["in_progress", "generating", "completed"]),
    "mcp_call": ("mcp_call", ["in_progress", "completed"]),
    "mcp_list_tools": ("mcp_list_tools", ["in_progress", "completed"]),
}


def in_progress(item: dict[str, Any]) -> dict[str, Any]:
    """The item as its `output_item.added` event shows it, before the tool ran."""
    kind = item["type"]
    started = {**item, "status": "in_progress"} if "status" in item else dict(item)
    if kind == "mcp_call":
        return {**started, "arguments": "", "output": None, "error": None}
    if kind == "code_interpreter_call":
        return {**started, "code": "", "outputs": None}
    if kind == "image_generation_call":
        return {**started, "result": None}
    if kind == "web_search_call":
        return {**started, "action": {"type": "search"}}
    if kind == "file_search_call":
        return {**started, "results": None}
    if kind == "mcp_list_tools":
        return {**started, "tools": []}
    return started


def progress_events(item: dict[str, Any], ref: dict[str, Any]) -> list[dict[str, Any]]:
    """The events a hosted tool streams while it runs."""
    kind = item["type"]
    if kind not in _PROGRESS:
        return []
    name, stages = _PROGRESS[kind]
    failed = item.get("status") == "failed" or bool(item.get("error"))
    events = [{"type": f"response.{name}.{stage}", **ref} for stage in stages[:-1]]
    if kind == "mcp_call":
        arguments = item["arguments"]
        events.append({"type": "response.mcp_call_arguments.delta", **ref, "delta": arguments})
        events.append({"type": "response.mcp_call_arguments.done", **ref, "arguments": arguments})
    elif kind == "code_interpreter_call":
        code = item["code"]
        events.insert(
            1, {"type": "response.code_interpreter_call_code.delta", **ref, "delta": code}
        )
        events.insert(2, {"type": "response.code_interpreter_call_code.done", **ref, "code": code})
    elif kind == "image_generation_call":
        partial = {"partial_image_index": 0, "partial_image_b64": item["result"]}
        events.append({"type": "response.image_generation_call.partial_image", **ref, **partial})
    last = "failed" if failed and kind.startswith("mcp_") else stages[-1]
    return [*events, {"type": f"response.{name}.{last}", **ref}]
